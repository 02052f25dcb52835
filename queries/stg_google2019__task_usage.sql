-- google-2019's instance_usage in the common task-usage shape fct_task_usage_stats reads: one row
-- per instance (v3's task or alloc instance, (collection_id, instance_index) as (job_id,
-- task_index)) and measurement window. cpu_sampled = random_sample_usage.cpus (one randomly
-- sampled second, as 2011's sampled_cpu_usage), cpu_mean = average_usage.cpus, cpu_max =
-- maximum_usage.cpus, cpu_p90 = the window's 90th CPU percentile (cpu_usage_distribution holds
-- the 0th, 10th, ..., 100th: element 10 of 11), memory_mean = average_usage.memory.
with

instance_usage_v3 as (
    select * from instance_usage
),

final as (
    select
        collection_id as job_id,
        instance_index as task_index,
        start_time,
        end_time,
        random_sample_usage_cpus as cpu_sampled,
        average_usage_cpus as cpu_mean,
        maximum_usage_cpus as cpu_max,
        cpu_usage_distribution[10] as cpu_p90,
        average_usage_memory as memory_mean,
        source_file,
        source_row,
    from instance_usage_v3
)

select * from final
