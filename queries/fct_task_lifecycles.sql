-- one row per task (job_id, task_index) across its incarnations: the per-task record peers publish,
-- for every trace whose staging gives stg_task_events: from its events (in (time, source_file,
-- source_row) order, fct_task_transitions' order) and fct_task_times (one row per incarnation,
-- from a SUBMIT on).
-- first_submit_time and last_terminal_time keep the markers 0 (before the window) and 2^63-1
-- (after it); last_terminal_event_type is the trace's own code. n_attempts = SCHEDULE events.
-- final_state is the state after the task's last event that is not an UPDATE (an UPDATE keeps the
-- state): pending, queued (google-2019's batch queue), running, or the way it died.
-- total_wait_s sums the time pending (SUBMIT -> its SCHEDULE, or -> the death of an incarnation
-- that never ran; google-2019: time queued included), total_run_s the time running (SCHEDULE ->
-- the terminal event), over all incarnations, in µs then converted (an exact integer sum, the
-- same on every run). either is null when a part of it is unknown: an interval that starts or
-- ends at a marker, an incarnation still pending (wait) or running (run) at the end of the data,
-- or events before the task's first SUBMIT in the data (its history predates the data).
-- has_missing_info: the trace synthesised at least one of the task's records. is_production is
-- the staging view's for the priority of the task's last event.
with

events as (
    select
        job_id,
        task_index,
        (time, source_file, source_row) as event_order,
        time,
        event_type,
        event,
        priority,
        is_production,
        missing_info,
        event in ('evict', 'fail', 'finish', 'kill', 'lost') as is_terminal,
    from stg_task_events
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
        arg_max(priority, event_order) as priority,
        arg_max(is_production, event_order) as is_production,
        min(time) as first_event_time,
        min(time) filter (where event = 'submit') as first_submit_time,
        max(time) filter (where is_terminal) as last_terminal_time,
        arg_max(event_type, event_order) filter (where is_terminal) as last_terminal_event_type,
        coalesce(
            arg_max(event, event_order) filter (
                where event not in ('update_pending', 'update_running')
            ),
            arg_max(event, event_order)
        ) as state_event,
        count(*) filter (where event = 'submit') as n_submits,
        count(*) filter (where event = 'schedule') as n_attempts,
        -- incarnation 0: the task's first event in the data is not a SUBMIT
        arg_min(event, event_order) <> 'submit' as has_events_before_submit,
        count(missing_info) > 0 as has_missing_info,
    from events
    group by job_id, task_index
),

final as (
    select
        e.job_id,
        e.task_index,
        e.priority,
        e.is_production,
        e.first_event_time,
        e.first_submit_time,
        e.last_terminal_time,
        e.last_terminal_event_type,
        case e.state_event
            when 'submit' then 'pending'
            when 'enable' then 'pending'
            when 'update_pending' then 'pending'
            when 'queue' then 'queued'
            when 'schedule' then 'running'
            when 'update_running' then 'running'
            when 'evict' then 'evicted'
            when 'fail' then 'failed'
            when 'finish' then 'finished'
            when 'kill' then 'killed'
            when 'lost' then 'lost'
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
