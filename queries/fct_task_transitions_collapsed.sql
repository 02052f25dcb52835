-- transitions with UPDATE_PENDING / UPDATE_RUNNING removed (docs/methods.md §1.2, Zhu et al. method 3-2):
-- a SUBMIT then leads to SCHEDULE or a "pending" death (EVICT FAIL KILL LOST) and a SCHEDULE to
-- FINISH or a "running" death. death_phase says which; it is null for every other pair.
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
        priority,
        is_production,
        source_file,
        source_row,
    from fct_task_transitions
    where event_type not in (7, 8)
),

relinked as (
    select
        *,
        lag(time) over task_order as prev_time,
        lag(event_type) over task_order as prev_event_type,
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
        priority,
        is_production,
        case
            when prev_event_type = 0 and event_type in (2, 3, 5, 6) then 'pending'
            when prev_event_type = 1 and event_type in (2, 3, 4, 5, 6) then 'running'
        end as death_phase,
        source_file,
        source_row,
    from relinked
    -- a stable row order: repeated and partitioned runs write identical files
    order by job_id, task_index, event_seq
)

select * from final
