-- the partitions of one per-task table, concatenated in a stable (job_id, task_index) order
with
parts as (
    select * from read_parquet($files)
),

final as (
    select * from parts
    order by job_id, task_index
)

select * from final
