-- fct_task_usage_stats holds one row per (job_id, task_index); offending tasks are returned
with

final as (
    select
        job_id,
        task_index,
        count(*) as n_rows,
    from fct_task_usage_stats
    group by job_id, task_index
    having count(*) > 1
)

select * from final
