-- every task event paired with the task's previous event (docs/methods.md §1.1; Zhu et al. §2.2, method 3-2),
-- over stg_task_events, so every trace whose staging gives task events derives it (google-2019: an
-- instance is a task). event_type is the trace's own code, event its common name.
-- order within a task is (time, source_file, source_row): same-microsecond events keep file order.
-- times 0 (before the window) and 2^63-1 (after it) are kept: they sort first and last, so a task
-- alive at the window start still shows its SUBMIT -> SCHEDULE pair.
-- prev_event_type is null for the first event of a task in the data (its history may predate it).
-- states (the general graph: google-2011 has no QUEUE / ENABLE, so it is never queued): pending after
-- SUBMIT, ENABLE, UPDATE_PENDING; queued after QUEUE (and an UPDATE_PENDING while queued); running
-- after SCHEDULE, UPDATE_RUNNING; dead after EVICT FAIL FINISH KILL LOST. an UPDATE names the state
-- it is sent in, so state_before is the state the previous event leaves.
with

events as (
    select
        job_id,
        task_index,
        time,
        event_type,
        event,
        priority,
        is_production,
        cpu_request,
        memory_request,
        machine_id,
        missing_info,
        source_file,
        source_row,
    from stg_task_events
),

ordered as (
    select
        *,
        row_number() over task_order as event_seq,
        lag(time) over task_order as prev_time,
        lag(event_type) over task_order as prev_event_type,
        lag(event) over task_order as prev_event,
        lag(priority) over task_order as prev_priority,
        lag(cpu_request) over task_order as prev_cpu_request,
        lag(memory_request) over task_order as prev_memory_request,
        -- the last event up to this one other than an UPDATE_PENDING: an UPDATE_PENDING keeps the
        -- task queued when it was queued, and is pending otherwise
        last_value(case when event != 'update_pending' then event end ignore nulls) over (
            task_order rows between unbounded preceding and current row
        ) as last_non_update_pending,
        -- incarnation n = the events from the task's n-th SUBMIT on; 0 = before its first SUBMIT
        cast(count(*) filter (where event = 'submit') over (
            task_order rows between unbounded preceding and current row
        ) as bigint) as incarnation,
    from events
    window task_order as (partition by job_id, task_index order by time, source_file, source_row)
),

states as (
    select
        *,
        case
            when event in ('submit', 'enable') then 'pending'
            when event = 'queue' then 'queued'
            when event = 'update_pending' and last_non_update_pending = 'queue' then 'queued'
            when event = 'update_pending' then 'pending'
            when event in ('schedule', 'update_running') then 'running'
            when event in ('evict', 'fail', 'finish', 'kill', 'lost') then 'dead'
        end as state_after,
    from ordered
),

linked as (
    select
        *,
        lag(state_after) over (partition by job_id, task_index order by event_seq) as state_before,
    from states
),

final as (
    select
        job_id,
        task_index,
        event_seq,
        incarnation,
        time,
        prev_time,
        prev_event_type,
        event_type,
        prev_event,
        event,
        priority,
        is_production,
        prev_priority,
        cpu_request,
        memory_request,
        prev_cpu_request,
        prev_memory_request,
        machine_id,
        missing_info,
        source_file,
        source_row,
        state_before,
        state_after,
        -- the documented graph (google-2011's format doc and the Borg paper; v3's proto comments):
        -- SUBMIT from dead; QUEUE pending -> queued; ENABLE queued -> pending; SCHEDULE pending ->
        -- running; EVICT, FINISH from running; FAIL, KILL, LOST from pending, queued or running;
        -- UPDATE_PENDING in pending or queued; UPDATE_RUNNING in running. the paper's findings break
        -- it: SUBMIT -> EVICT occurs, SUBMIT -> SUBMIT never does.
        case
            when prev_event is null then null
            when event = 'submit' then coalesce(state_before = 'dead', false)
            when event in ('queue', 'schedule') then coalesce(state_before = 'pending', false)
            when event = 'enable' then coalesce(state_before = 'queued', false)
            when event in ('evict', 'finish', 'update_running')
                then coalesce(state_before = 'running', false)
            when event in ('fail', 'kill', 'lost')
                then coalesce(state_before in ('pending', 'queued', 'running'), false)
            when event = 'update_pending' then coalesce(state_before in ('pending', 'queued'), false)
            else false
        end as allowed_by_documented_graph,
    from linked
    -- a stable row order: repeated and partitioned runs write identical files
    order by job_id, task_index, event_seq
)

select * from final
