-- cluster-total CPU and memory used per 5-minute window and the relative change from the previous
-- window (docs/methods.md §1.7, Zhu et al. §4.1, Figure 10): change = (x_k - x_{k-1}) / x_{k-1}, null for the
-- first window and after an idle one. *_within_threshold says |change| < $change_threshold
-- (paper: more than 90% of windows within 20%); the report takes the share of true values.
-- a window no task_usage record covers (a few parts of the trace) has no known use: the change
-- into it and out of it is null, not -100% and back. the classes add in a fixed order, so two
-- runs give the same bits.
with

usage as (
    select
        window_index,
        window_start,
        sum(used_cpu order by priority_class) as used_cpu,
        sum(used_memory order by priority_class) as used_memory,
        sum(usage_records) > 0 as has_records,
    from agg_usage_by_priority
    group by window_index, window_start
),

previous as (
    select
        *,
        case when has_records and lag(has_records) over by_window
            then lag(used_cpu) over by_window end as previous_cpu,
        case when has_records and lag(has_records) over by_window
            then lag(used_memory) over by_window end as previous_memory,
    from usage
    window by_window as (order by window_index)
),

changes as (
    select
        *,
        (used_cpu - previous_cpu) / nullif(previous_cpu, 0) as cpu_change,
        (used_memory - previous_memory) / nullif(previous_memory, 0) as memory_change,
    from previous
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
