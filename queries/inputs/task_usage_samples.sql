-- per-task inst/avg sample sequences for the analysis stages (docs/methods.md §2.1, §2.3, §2.5).
-- not materialised: the analyze flow streams it in record batches, tasks contiguous and each task's
-- windows in start_time order (DuckDB sorts out of core, so memory stays bounded).
with

usage as (
    select
        job_id,
        task_index,
        start_time,
        sampled_cpu_usage as inst,
        -- docs/methods.md §1.8: avg above 1 (the largest machine) is a measurement error; use inst instead
        case when cpu_rate > 1 then sampled_cpu_usage else cpu_rate end as avg,
    from read_parquet($lake_glob)
    where sampled_cpu_usage is not null
),

tasks as (
    select
        job_id,
        task_index,
    from read_parquet($stats_path)
    where is_long or not $long_only
),

final as (
    select
        usage.job_id,
        usage.task_index,
        usage.start_time,
        usage.inst,
        usage.avg,
    from usage
    semi join tasks using (job_id, task_index)
    -- two records of a task can share a start_time: ordered by every column, rows that still tie
    -- are identical, so the stream is the same in every run
    order by usage.job_id, usage.task_index, usage.start_time, usage.inst, usage.avg
)

select * from final
