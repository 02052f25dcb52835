-- google-2019: one row per instance incarnation (parallel to fct_task_times): the events from a
-- SUBMIT up to the next SUBMIT. scheduling time = SUBMIT -> first SCHEDULE (time in v3's batch
-- queue included); execution time = that SCHEDULE -> the first terminal event (EVICT FAIL FINISH
-- KILL LOST) after it. terminal_phase is 'pending' when the incarnation died before any
-- SCHEDULE (pending or queued), 'running' after one, null while alive at the end of the data.
-- times 0 (before the window) and 2^63-1 (after it) are kept in the time columns, but a duration
-- that starts or ends at either is unknown and left null. events before an instance's first
-- SUBMIT in the data (incarnation 0) are not incarnations here.
with

events as (
    select
        collection_id,
        instance_index,
        incarnation,
        event_seq,
        time,
        event_type,
        priority,
    from fct_g2019_instance_transitions
    where incarnation >= 1
),

per_incarnation as (
    select
        collection_id,
        instance_index,
        incarnation,
        arg_min(time, event_seq) filter (where event_type = 0) as submit_time,
        arg_min(priority, event_seq) filter (where event_type = 0) as priority,
        min(event_seq) filter (where event_type = 3) as schedule_seq,
        arg_min(time, event_seq) filter (where event_type = 3) as schedule_time,
        min(event_seq) filter (where event_type in (4, 5, 6, 7, 8)) as terminal_seq,
        arg_min(time, event_seq) filter (where event_type in (4, 5, 6, 7, 8)) as end_time,
        arg_min(event_type, event_seq) filter (where event_type in (4, 5, 6, 7, 8))
            as terminal_event_type,
        count(*) as n_events,
    from events
    group by collection_id, instance_index, incarnation
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
        collection_id,
        instance_index,
        incarnation,
        priority,
        priority >= $g2019_production_priority as is_production,
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
    from phased
    -- a stable row order: repeated runs write identical files
    order by collection_id, instance_index, incarnation
)

select * from final
