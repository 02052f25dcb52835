-- one job_id-hash partition of a lake table, for per-task tables computed on Dask workers.
-- a task is (job_id, task_index), so partitioning on job_id alone never splits a task, and
-- duckdb's hash() is deterministic, so every worker agrees on where a job's rows belong
with
lake as (
    select * from read_parquet($files, union_by_name = true)
),

final as (
    select * from lake
    where hash(job_id) % $n_partitions = $partition
)

select * from final
