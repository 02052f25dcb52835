-- the usage page's table (docs/methods.md §1.6, Zhu et al. Fig. 9): one row per priority class of
-- agg_usage_by_priority, its requested and used CPU and memory summed over the covered windows
-- (those some task_usage record covers: elsewhere use is 0 for want of records, not idleness);
-- cpu_ / memory_used_over_requested = used / requested (a class that requested nothing divides
-- by 1e-300); share_of_used_cpu = the class's share of all CPU used (NULL when none was used).
-- sums add in window order, so two runs give the same bits.
with

covered as (
    select window_start
    from agg_usage_by_priority
    group by window_start
    having sum(usage_records) > 0
),

by_class as (
    select
        agg_usage_by_priority.priority_class,
        coalesce(sum(agg_usage_by_priority.requested_cpu order by agg_usage_by_priority.window_start), 0)
            as requested_cpu,
        coalesce(sum(agg_usage_by_priority.used_cpu order by agg_usage_by_priority.window_start), 0)
            as used_cpu,
        coalesce(
            sum(agg_usage_by_priority.requested_memory order by agg_usage_by_priority.window_start), 0
        ) as requested_memory,
        coalesce(sum(agg_usage_by_priority.used_memory order by agg_usage_by_priority.window_start), 0)
            as used_memory,
    from agg_usage_by_priority
    inner join covered on agg_usage_by_priority.window_start = covered.window_start
    group by agg_usage_by_priority.priority_class
),

total as (
    select sum(used_cpu order by priority_class) as used_cpu
    from by_class
),

final as (
    select
        by_class.priority_class,
        by_class.requested_cpu,
        by_class.used_cpu,
        by_class.requested_memory,
        by_class.used_memory,
        by_class.used_cpu / greatest(by_class.requested_cpu, 1e-300) as cpu_used_over_requested,
        by_class.used_memory / greatest(by_class.requested_memory, 1e-300)
            as memory_used_over_requested,
        by_class.used_cpu / nullif(total.used_cpu, 0) as share_of_used_cpu,
    from by_class
    cross join total
    order by by_class.priority_class
)

select * from final
