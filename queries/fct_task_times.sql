-- one row per task incarnation (docs/methods.md §1.5, Zhu et al. Observations 9-10, Figure 8), for
-- every trace whose staging gives stg_task_events: the events from a SUBMIT up to the next SUBMIT,
-- in (time, source_file, source_row) order within a task (fct_task_transitions' order).
-- scheduling time = SUBMIT -> first SCHEDULE (google-2019: time in v3's batch queue included);
-- execution time = that SCHEDULE -> the first terminal event (EVICT FAIL FINISH KILL LOST) after it.
-- terminal_event_type is the trace's own code; terminal_phase is 'pending' when the incarnation
-- died before any SCHEDULE, 'running' after one, null while still alive at the end of the data.
-- times 0 (before the window) and 2^63-1 (after it) are kept in the time columns, but a duration
-- that starts or ends at either is unknown and left null. events before a task's first SUBMIT in
-- the data (incarnation 0) have no submit time and are not incarnations here.
-- the *_time columns (µs) let a report order incarnations for moving averages.
-- submit_missing_info / schedule_missing_info / end_missing_info: the trace's missing-info code of
-- the SUBMIT, SCHEDULE and terminal record the durations start and end at (google-2011: 0 snapshot
-- but no transition, 1 no snapshot or transition: the time is a pessimistic upper bound, 2 exists
-- but no creation: SUBMIT or SCHEDULE may be placed late; google-2019: v3's missing_type 1-5);
-- null = a genuine record. arg_min_null, as arg_min skips the null codes of genuine records.
-- is_production is the staging view's, which depends on the priority alone.
with

ordered as (
    select
        job_id,
        task_index,
        time,
        event_type,
        event,
        priority,
        is_production,
        missing_info,
        event in ('evict', 'fail', 'finish', 'kill', 'lost') as is_terminal,
        row_number() over task_order as event_seq,
        cast(count(*) filter (where event = 'submit') over (
            task_order rows between unbounded preceding and current row
        ) as bigint) as incarnation,
    from stg_task_events
    window task_order as (partition by job_id, task_index order by time, source_file, source_row)
),

events as (
    select * from ordered
    where incarnation >= 1
),

per_incarnation as (
    select
        job_id,
        task_index,
        incarnation,
        min(event_seq) filter (where event = 'submit') as submit_seq,
        arg_min(time, event_seq) filter (where event = 'submit') as submit_time,
        arg_min(priority, event_seq) filter (where event = 'submit') as priority,
        arg_min(is_production, event_seq) filter (where event = 'submit') as is_production,
        arg_min_null(missing_info, event_seq) filter (where event = 'submit')
            as submit_missing_info,
        min(event_seq) filter (where event = 'schedule') as schedule_seq,
        arg_min(time, event_seq) filter (where event = 'schedule') as schedule_time,
        arg_min_null(missing_info, event_seq) filter (where event = 'schedule')
            as schedule_missing_info,
        min(event_seq) filter (where is_terminal) as terminal_seq,
        arg_min(time, event_seq) filter (where is_terminal) as end_time,
        arg_min(event_type, event_seq) filter (where is_terminal)
            as terminal_event_type,
        arg_min_null(missing_info, event_seq) filter (where is_terminal)
            as end_missing_info,
        count(*) as n_events,
    from events
    group by job_id, task_index, incarnation
),

phased as (
    select
        *,
        -- a SCHEDULE after the terminal event is not this incarnation's start of execution
        schedule_seq is not null and (terminal_seq is null or schedule_seq < terminal_seq)
            as was_scheduled,
        submit_time > 0 and submit_time < $time_after_window_us as submit_known,
        schedule_time > 0 and schedule_time < $time_after_window_us as schedule_known,
        end_time > 0 and end_time < $time_after_window_us as end_known,
    from per_incarnation
),

final as (
    select
        job_id,
        task_index,
        incarnation,
        priority,
        is_production,
        submit_time,
        case when was_scheduled then schedule_time end as schedule_time,
        end_time,
        terminal_event_type,
        case
            when terminal_seq is null then null
            when was_scheduled then 'running'
            else 'pending'
        end as terminal_phase,
        case
            when was_scheduled and submit_known and schedule_known
                then (schedule_time - submit_time) / 1e6
        end as scheduling_time_s,
        case
            when was_scheduled and terminal_seq is not null and schedule_known and end_known
                then (end_time - schedule_time) / 1e6
        end as execution_time_s,
        n_events,
        submit_missing_info,
        case when was_scheduled then schedule_missing_info end as schedule_missing_info,
        end_missing_info,
    from phased
    -- a stable row order: repeated and partitioned runs write identical files
    order by job_id, task_index, incarnation
)

select * from final
