-- cluster-total CPU and memory used per 5-minute window and the relative change from the previous
-- window (docs/methods.md §1.7, Zhu et al. §4.1, Figure 10): change = (x_k - x_{k-1}) / x_{k-1}, null for the
-- first window and after an idle one. *_within_threshold says |change| < $change_threshold
-- (paper: more than 90% of windows within 20%); the report takes the share of true values.
with

usage as (
    select
        window_index,
        window_start,
        sum(used_cpu) as used_cpu,
        sum(used_memory) as used_memory,
    from agg_usage_by_priority
    group by window_index, window_start
),

changes as (
    select
        *,
        (used_cpu - lag(used_cpu) over by_window) / nullif(lag(used_cpu) over by_window, 0)
            as cpu_change,
        (used_memory - lag(used_memory) over by_window)
            / nullif(lag(used_memory) over by_window, 0) as memory_change,
    from usage
    window by_window as (order by window_index)
),

final as (
    select
        window_index,
        window_start,
        used_cpu,
        used_memory,
        cpu_change,
        memory_change,
        abs(cpu_change) < $change_threshold as cpu_within_threshold,
        abs(memory_change) < $change_threshold as memory_within_threshold,
    from changes
    order by window_index
)

select * from final
