-- transitions with UPDATE_PENDING / UPDATE_RUNNING removed (docs/methods.md §1.2, Zhu et al. method 3-2):
-- a SUBMIT (or ENABLE) then leads to QUEUE, SCHEDULE or a "pending" death (EVICT FAIL KILL LOST), a
-- QUEUE to ENABLE or a "queued" death, and a SCHEDULE to FINISH or a "running" death. death_phase
-- says which; it is null for every other pair. google-2011 has no QUEUE / ENABLE, so no queued phase.
-- times 0 and 2^63-1 are kept as in fct_task_transitions.
with

transitions as (
    select
        job_id,
        task_index,
        event_seq,
        incarnation,
        time,
        event_type,
        event,
        priority,
        is_production,
        source_file,
        source_row,
    from fct_task_transitions
    where event not in ('update_pending', 'update_running')
),

relinked as (
    select
        *,
        lag(time) over task_order as prev_time,
        lag(event_type) over task_order as prev_event_type,
        lag(event) over task_order as prev_event,
    from transitions
    window task_order as (partition by job_id, task_index order by event_seq)
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
        case
            when prev_event in ('submit', 'enable') and event in ('evict', 'fail', 'kill', 'lost')
                then 'pending'
            when prev_event = 'queue' and event in ('evict', 'fail', 'kill', 'lost') then 'queued'
            when prev_event = 'schedule' and event in ('evict', 'fail', 'finish', 'kill', 'lost')
                then 'running'
        end as death_phase,
        source_file,
        source_row,
    from relinked
    -- a stable row order: repeated and partitioned runs write identical files
    order by job_id, task_index, event_seq
)

select * from final
