-- every event gets exactly one position in its task's order (no ties left unresolved)
with

final as (
    select
        job_id,
        task_index,
        event_seq,
        count(*) as n_rows,
    from fct_task_transitions
    group by job_id, task_index, event_seq
    having count(*) > 1
)

select * from final
