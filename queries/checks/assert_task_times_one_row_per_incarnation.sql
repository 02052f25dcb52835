-- fct_task_times holds one row per (job_id, task_index, incarnation)
with

final as (
    select
        job_id,
        task_index,
        incarnation,
        count(*) as n_rows,
    from fct_task_times
    group by job_id, task_index, incarnation
    having count(*) > 1
)

select * from final
