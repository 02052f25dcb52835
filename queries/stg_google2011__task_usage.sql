-- google-2011's task_usage in the common task-usage shape fct_task_usage_stats reads: one row per
-- task and measurement window, (job_id, task_index). cpu_sampled = sampled_cpu_usage (one random
-- second of the window), cpu_mean = cpu_rate (the window's mean), cpu_max = maximum_cpu_rate,
-- memory_mean = canonical_memory_usage (the window's mean, normalized). the trace records no CPU
-- percentiles of a window: cpu_p90 is null.
with

task_usage_v2 as (
    select * from task_usage
),

final as (
    select
        job_id,
        task_index,
        start_time,
        end_time,
        sampled_cpu_usage as cpu_sampled,
        cpu_rate as cpu_mean,
        maximum_cpu_rate as cpu_max,
        cast(null as double) as cpu_p90,
        canonical_memory_usage as memory_mean,
        source_file,
        source_row,
    from task_usage_v2
)

select * from final
