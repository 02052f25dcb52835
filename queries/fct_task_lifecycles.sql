-- one row per task (job_id, task_index) across its incarnations: the per-task record peers publish.
-- from fct_task_transitions (every event, in (time, source_file, source_row) order) and
-- fct_task_times (one row per incarnation, from a SUBMIT on).
-- first_submit_time and last_terminal_time keep the markers 0 (before the window) and 2^63-1
-- (after it). n_attempts = SCHEDULE events. final_state is the state after the task's last event
-- that is not an UPDATE (an UPDATE keeps the state): pending, running, or the way it died.
-- total_wait_s sums the time pending (SUBMIT -> its SCHEDULE, or -> the death of an incarnation
-- that never ran), total_run_s the time running (SCHEDULE -> the terminal event), over all
-- incarnations, in µs then converted (an exact integer sum, the same on every run). either is null
-- when a part of it is unknown: an interval that starts or ends at a marker, an incarnation still
-- pending (wait) or running (run) at the end of the data, or events before the task's first
-- SUBMIT in the data (its history predates the data). has_missing_info: the trace synthesised at
-- least one of the task's records (task_events' missing_info set).
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
),

incarnations as (
    select
        job_id,
        task_index,
        submit_time,
        schedule_time,
        end_time,
        terminal_phase,
        submit_time > 0 and submit_time < $time_after_window_us as submit_known,
        schedule_time > 0 and schedule_time < $time_after_window_us as schedule_known,
        end_time > 0 and end_time < $time_after_window_us as end_known,
    from fct_task_times
),

incarnation_durations as (
    select
        job_id,
        task_index,
        case
            when schedule_time is not null
                then case when submit_known and schedule_known then schedule_time - submit_time end
            when terminal_phase = 'pending'
                then case when submit_known and end_known then end_time - submit_time end
        end as wait_us,
        case
            when schedule_time is null then 0
            when end_time is not null and schedule_known and end_known
                then end_time - schedule_time
        end as run_us,
    from incarnations
),

per_task_durations as (
    select
        job_id,
        task_index,
        case when count(*) = count(wait_us) then sum(wait_us) end as total_wait_us,
        case when count(*) = count(run_us) then sum(run_us) end as total_run_us,
    from incarnation_durations
    group by job_id, task_index
),

per_task_events as (
    select
        job_id,
        task_index,
        count(*) as n_events,
        arg_max(priority, event_seq) as priority,
        arg_min(time, event_seq) as first_event_time,
        arg_min(time, event_seq) filter (where event_type = 0) as first_submit_time,
        arg_max(time, event_seq) filter (where event_type in (2, 3, 4, 5, 6)) as last_terminal_time,
        arg_max(event_type, event_seq) filter (where event_type in (2, 3, 4, 5, 6))
            as last_terminal_event_type,
        coalesce(
            arg_max(event_type, event_seq) filter (where event_type not in (7, 8)),
            arg_max(event_type, event_seq)
        ) as state_event_type,
        count(*) filter (where event_type = 0) as n_submits,
        count(*) filter (where event_type = 1) as n_attempts,
        bool_or(incarnation = 0) as has_events_before_submit,
        count(missing_info) > 0 as has_missing_info,
    from events
    group by job_id, task_index
),

final as (
    select
        e.job_id,
        e.task_index,
        e.priority,
        e.priority >= $production_priority as is_production,
        e.first_event_time,
        e.first_submit_time,
        e.last_terminal_time,
        e.last_terminal_event_type,
        case e.state_event_type
            when 0 then 'pending'
            when 7 then 'pending'
            when 1 then 'running'
            when 8 then 'running'
            when 2 then 'evicted'
            when 3 then 'failed'
            when 4 then 'finished'
            when 5 then 'killed'
            when 6 then 'lost'
        end as final_state,
        e.n_events,
        e.n_submits,
        e.n_attempts,
        case when not e.has_events_before_submit then d.total_wait_us / 1e6 end as total_wait_s,
        case when not e.has_events_before_submit then d.total_run_us / 1e6 end as total_run_s,
        e.has_missing_info,
    from per_task_events as e
    left join per_task_durations as d using (job_id, task_index)
    -- a stable row order: repeated and partitioned runs write identical files
    order by e.job_id, e.task_index
)

select * from final
