-- one row per task incarnation (docs/methods.md §1.5, Zhu et al. Observations 9-10, Figure 8): the events from
-- a SUBMIT up to the next SUBMIT. scheduling time = SUBMIT -> first SCHEDULE; execution time =
-- that SCHEDULE -> the first terminal event (EVICT FAIL FINISH KILL LOST) after it.
-- terminal_phase is 'pending' when the incarnation died before any SCHEDULE, 'running' after one,
-- null while still alive at the end of the data.
-- times 0 (before the window) and 2^63-1 (after it) are kept in the time columns, but a duration
-- that starts or ends at either is unknown and left null. events before a task's first SUBMIT in
-- the data (incarnation 0) have no submit time and are not incarnations here.
-- the *_time columns (µs) let a report order incarnations for moving averages.
-- submit_missing_info / schedule_missing_info / end_missing_info: the trace's "missing info" code of
-- the SUBMIT, SCHEDULE and terminal record the durations start and end at (0 snapshot but no
-- transition, 1 no snapshot or transition: the time is a pessimistic upper bound, 2 exists but no
-- creation: SUBMIT or SCHEDULE may be placed late); null = a genuine record. arg_min_null, as
-- arg_min skips the null codes of genuine records.
with

events as (
    select
        job_id,
        task_index,
        incarnation,
        event_seq,
        time,
        event_type,
        priority,
        missing_info,
    from fct_task_transitions
    where incarnation >= 1
),

per_incarnation as (
    select
        job_id,
        task_index,
        incarnation,
        min(event_seq) filter (where event_type = 0) as submit_seq,
        arg_min(time, event_seq) filter (where event_type = 0) as submit_time,
        arg_min(priority, event_seq) filter (where event_type = 0) as priority,
        arg_min_null(missing_info, event_seq) filter (where event_type = 0) as submit_missing_info,
        min(event_seq) filter (where event_type = 1) as schedule_seq,
        arg_min(time, event_seq) filter (where event_type = 1) as schedule_time,
        arg_min_null(missing_info, event_seq) filter (where event_type = 1)
            as schedule_missing_info,
        min(event_seq) filter (where event_type in (2, 3, 4, 5, 6)) as terminal_seq,
        arg_min(time, event_seq) filter (where event_type in (2, 3, 4, 5, 6)) as end_time,
        arg_min(event_type, event_seq) filter (where event_type in (2, 3, 4, 5, 6))
            as terminal_event_type,
        arg_min_null(missing_info, event_seq) filter (where event_type in (2, 3, 4, 5, 6))
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
        priority >= $production_priority as is_production,
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
