-- every event gets exactly one position in its task's order (no ties left unresolved), one row per
-- source line, and a verdict on the documented graph exactly when it has a previous event
with

positions as (
    select
        job_id,
        task_index,
        event_seq,
        'more than one row at this position' as problem,
    from fct_task_transitions
    group by job_id, task_index, event_seq
    having count(*) > 1
),

lines as (
    select
        any_value(job_id) as job_id,
        any_value(task_index) as task_index,
        any_value(event_seq) as event_seq,
        'more than one row for this source line' as problem,
    from fct_task_transitions
    group by source_file, source_row
    having count(*) > 1
),

verdicts as (
    select
        job_id,
        task_index,
        event_seq,
        'verdict missing or given without a previous event' as problem,
    from fct_task_transitions
    where (prev_event_type is null) != (allowed_by_documented_graph is null)
),

final as (
    select * from positions
    union all
    select * from lines
    union all
    select * from verdicts
)

select * from final
