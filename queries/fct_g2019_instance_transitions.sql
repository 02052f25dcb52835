-- google-2019: every instance event paired with the instance's previous event, and the state it
-- leaves and enters in the v3 state graph (parallel to fct_task_transitions; an instance is v3's
-- task or alloc instance, keyed by collection_id, instance_index).
-- v3 event types: 0 SUBMIT, 1 QUEUE, 2 ENABLE, 3 SCHEDULE, 4 EVICT, 5 FAIL, 6 FINISH, 7 KILL,
-- 8 LOST, 9 UPDATE_PENDING, 10 UPDATE_RUNNING. states: pending (after SUBMIT, ENABLE), queued
-- (after QUEUE), running (after SCHEDULE), dead (after EVICT..LOST); an UPDATE_* keeps the state.
-- documented graph (clusterdata_trace_format_v3.proto's event comments): SUBMIT from dead (a
-- resubmission); QUEUE pending -> queued; ENABLE queued -> pending; SCHEDULE pending -> running;
-- EVICT and FINISH from running; FAIL, KILL, LOST from pending, queued or running;
-- UPDATE_PENDING in pending or queued; UPDATE_RUNNING in running.
-- order within an instance is (time, source_file, source_row); state_before is null for the first
-- event of an instance in the data (its history may predate it), and so is the verdict.
with

events as (
    select
        collection_id,
        instance_index,
        time,
        type as event_type,
        priority,
        resource_request_cpus as cpu_request,
        resource_request_memory as memory_request,
        machine_id,
        missing_type,
        source_file,
        source_row,
    from instance_events
),

ordered as (
    select
        *,
        row_number() over instance_order as event_seq,
        lag(time) over instance_order as prev_time,
        lag(event_type) over instance_order as prev_event_type,
        -- the last event before this one that is not an UPDATE_*: it fixes the state
        last_value(case when event_type not in (9, 10) then event_type end ignore nulls) over (
            instance_order rows between unbounded preceding and 1 preceding
        ) as prev_state_event,
        cast(count(*) filter (where event_type = 0) over (
            instance_order rows between unbounded preceding and current row
        ) as bigint) as incarnation,
    from events
    window instance_order as (
        partition by collection_id, instance_index order by time, source_file, source_row
    )
),

states as (
    select
        *,
        case
            when prev_event_type is null then null
            when prev_state_event in (0, 2) then 'pending'
            when prev_state_event = 1 then 'queued'
            when prev_state_event = 3 then 'running'
            when prev_state_event in (4, 5, 6, 7, 8) then 'dead'
            -- only UPDATE_* events before this one: they name the state
            when prev_event_type = 9 then 'pending'
            when prev_event_type = 10 then 'running'
        end as state_before,
    from ordered
),

final as (
    select
        collection_id,
        instance_index,
        event_seq,
        incarnation,
        time,
        prev_time,
        prev_event_type,
        event_type,
        priority,
        priority >= $g2019_production_priority as is_production,
        cpu_request,
        memory_request,
        machine_id,
        missing_type,
        source_file,
        source_row,
        state_before,
        case
            when event_type in (0, 2) then 'pending'
            when event_type = 1 then 'queued'
            when event_type in (3, 10) then 'running'
            when event_type in (4, 5, 6, 7, 8) then 'dead'
            when event_type = 9 then coalesce(state_before, 'pending')
        end as state_after,
        case
            when state_before is null then null
            when event_type = 0 then state_before = 'dead'
            when event_type in (1, 3) then state_before = 'pending'
            when event_type = 2 then state_before = 'queued'
            when event_type in (4, 6, 10) then state_before = 'running'
            when event_type in (5, 7, 8) then state_before in ('pending', 'queued', 'running')
            when event_type = 9 then state_before in ('pending', 'queued')
            else false
        end as allowed_by_documented_graph,
    from states
    -- a stable row order: repeated runs write identical files
    order by collection_id, instance_index, event_seq
)

select * from final
