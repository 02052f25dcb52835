-- google-2019: per-instance distribution of inst and avg CPU usage (parallel to
-- fct_task_usage_stats, same columns): inst = random_sample_usage.cpus (one randomly sampled
-- second per window, as 2011's sampled_cpu_usage), avg = average_usage.cpus (the window mean).
-- v3 adds, per window, the maximum (maximum_usage.cpus) and the CPU percentiles
-- (cpu_usage_distribution: 0, 10, ..., 100 %): their means over the windows are win_max_mean and
-- win_p90_mean (the 90th percentile, element 10 of 11). mem_avg_mean is the mean of
-- average_usage.memory; cpu_request the instance's last requested CPU in instance_events.
-- kept: instances with no EVICT FAIL KILL LOST event, that have inst > 0 in at least one window;
-- where avg > 1 (above the largest machine) it is replaced by the window's inst. usage rows
-- without inst are not windows of the instance; a null avg is skipped by the avg statistics only.
-- std is the population std; percentiles interpolate linearly (numpy's defaults).
-- the window orders each instance's rows by their values over the whole partition: float means and
-- stds depend on the order of their additions, which without an order is the order DuckDB's
-- threads deliver the rows in, so two runs could differ in the last bits; rows equal in every
-- value used are interchangeable, so this order fixes every result.
with

failing_instances as (
    select distinct
        collection_id,
        instance_index,
    from instance_events
    where type in (4, 5, 7, 8)
),

requests as (
    select
        collection_id,
        instance_index,
        arg_max(resource_request_cpus, (time, source_file, source_row)) as cpu_request,
    from instance_events
    where resource_request_cpus is not null
    group by collection_id, instance_index
),

usage as (
    select
        collection_id,
        instance_index,
        random_sample_usage_cpus as inst,
        case
            when average_usage_cpus > 1 then random_sample_usage_cpus else average_usage_cpus
        end as avg,
        maximum_usage_cpus as win_max,
        cpu_usage_distribution[10] as win_p90,
        average_usage_memory as mem_avg,
    from instance_usage
    anti join failing_instances using (collection_id, instance_index)
    where random_sample_usage_cpus is not null
),

per_instance as (
    select
        collection_id,
        instance_index,
        count(*) over by_instance as n_windows,
        avg(inst) over by_instance as inst_mean,
        stddev_pop(inst) over by_instance as inst_std,
        min(inst) over by_instance as inst_min,
        max(inst) over by_instance as inst_max,
        quantile_cont(inst, [0.5, 0.9, 0.95, 0.99]) over by_instance as inst_q,
        avg(avg) over by_instance as avg_mean,
        stddev_pop(avg) over by_instance as avg_std,
        min(avg) over by_instance as avg_min,
        max(avg) over by_instance as avg_max,
        quantile_cont(avg, [0.5, 0.9, 0.95, 0.99]) over by_instance as avg_q,
        avg(win_max) over by_instance as win_max_mean,
        avg(win_p90) over by_instance as win_p90_mean,
        avg(mem_avg) over by_instance as mem_avg_mean,
    from usage
    window by_instance as (
        partition by collection_id, instance_index
        order by inst, avg, win_max, win_p90, mem_avg
        rows between unbounded preceding and unbounded following
    )
    qualify row_number() over by_instance = 1
),

final as (
    select
        collection_id,
        instance_index,
        n_windows,
        inst_mean,
        inst_std,
        inst_min,
        inst_max,
        inst_q[1] as inst_p50,
        inst_q[2] as inst_p90,
        inst_q[3] as inst_p95,
        inst_q[4] as inst_p99,
        avg_mean,
        avg_std,
        avg_min,
        avg_max,
        avg_q[1] as avg_p50,
        avg_q[2] as avg_p90,
        avg_q[3] as avg_p95,
        avg_q[4] as avg_p99,
        win_max_mean,
        win_p90_mean,
        mem_avg_mean,
        requests.cpu_request,
        n_windows >= $long_task_windows as is_long,
    from per_instance
    left join requests using (collection_id, instance_index)
    where inst_max > 0
    -- a stable row order: repeated runs write identical files
    order by collection_id, instance_index
)

select * from final
