-- requested vs used CPU and memory per 5-minute window, production vs non-production
-- (docs/methods.md §1.6, Zhu et al. §4.1, Figure 9). window k = [$window_start_us + k P, + (k+1) P),
-- P = $usage_window_us; k runs from 0 to the last window with data, within $window_length_us.
-- requested = time-weighted mean over the window of the summed latest request of running tasks
-- (running = after SCHEDULE or UPDATE_RUNNING; the request is the one on that event). it is built
-- from +/- steps per event, so the cost grows with events, not with tasks x windows.
-- used = sum over usage records of rate x record length / P (cpu_rate; canonical_memory_usage).
-- class: requests by the priority on the event; usage by the task's latest priority (a task with
-- no events in the data counts as non-production). production = priority >= $production_priority.
-- a step at time 0 (before the window) is placed at the window start; a step at 2^63-1 (after
-- the window) never happens inside it and is dropped. units: fractions of the largest machine.
-- float sums are exact: each value is rounded to 18 decimals (decimal(38, 18): integer
-- arithmetic, values within +-1e20) and summed without rounding, so the result does not depend on
-- the order DuckDB's threads add the rows in, as a sum of doubles does (fsum's Kahan sum too).
with

steps as (
    select
        greatest(time, $window_start_us) as step_time,
        case when event_type in (1, 8) and priority >= $production_priority
            then coalesce(cpu_request, 0) else 0 end
        - case when prev_event_type in (1, 8) and prev_priority >= $production_priority
            then coalesce(prev_cpu_request, 0) else 0 end as d_cpu_production,
        case when event_type in (1, 8) and priority < $production_priority
            then coalesce(cpu_request, 0) else 0 end
        - case when prev_event_type in (1, 8) and prev_priority < $production_priority
            then coalesce(prev_cpu_request, 0) else 0 end as d_cpu_non_production,
        case when event_type in (1, 8) and priority >= $production_priority
            then coalesce(memory_request, 0) else 0 end
        - case when prev_event_type in (1, 8) and prev_priority >= $production_priority
            then coalesce(prev_memory_request, 0) else 0 end as d_memory_production,
        case when event_type in (1, 8) and priority < $production_priority
            then coalesce(memory_request, 0) else 0 end
        - case when prev_event_type in (1, 8) and prev_priority < $production_priority
            then coalesce(prev_memory_request, 0) else 0 end as d_memory_non_production,
    from fct_task_transitions
    where time < $time_after_window_us
        and (event_type in (1, 8) or prev_event_type in (1, 8))
),

step_windows as (
    select
        (step_time - $window_start_us) // $usage_window_us as k,
        -- share of window k left after the step: a step at the window start counts fully
        ($window_start_us + ((step_time - $window_start_us) // $usage_window_us + 1)
            * $usage_window_us - step_time) / $usage_window_us as rest,
        d_cpu_production,
        d_cpu_non_production,
        d_memory_production,
        d_memory_non_production,
    from steps
),

step_sums as (
    select
        k,
        sum(d_cpu_production::decimal(38, 18))::double as d_cpu_production,
        sum(d_cpu_non_production::decimal(38, 18))::double as d_cpu_non_production,
        sum(d_memory_production::decimal(38, 18))::double as d_memory_production,
        sum(d_memory_non_production::decimal(38, 18))::double as d_memory_non_production,
        sum((d_cpu_production * rest)::decimal(38, 18))::double as part_cpu_production,
        sum((d_cpu_non_production * rest)::decimal(38, 18))::double as part_cpu_non_production,
        sum((d_memory_production * rest)::decimal(38, 18))::double as part_memory_production,
        sum((d_memory_non_production * rest)::decimal(38, 18))::double
            as part_memory_non_production,
    from step_windows
    group by k
),

task_class as (
    select
        job_id,
        task_index,
        arg_max(priority, event_seq) >= $production_priority as is_production,
    from fct_task_transitions
    group by job_id, task_index
),

usage_windows as (
    select
        (task_usage.start_time - $window_start_us) // $usage_window_us as k,
        coalesce(task_class.is_production, false) as is_production,
        task_usage.cpu_rate * (task_usage.end_time - task_usage.start_time) / $usage_window_us
            as cpu,
        task_usage.canonical_memory_usage * (task_usage.end_time - task_usage.start_time)
            / $usage_window_us as memory,
    from task_usage
    left join task_class using (job_id, task_index)
),

usage_sums as (
    select
        k,
        coalesce(sum(cpu::decimal(38, 18)) filter (where is_production), 0)::double
            as used_cpu_production,
        coalesce(sum(cpu::decimal(38, 18)) filter (where not is_production), 0)::double
            as used_cpu_non_production,
        coalesce(sum(memory::decimal(38, 18)) filter (where is_production), 0)::double
            as used_memory_production,
        coalesce(sum(memory::decimal(38, 18)) filter (where not is_production), 0)::double
            as used_memory_non_production,
        count(*) filter (where is_production) as records_production,
        count(*) filter (where not is_production) as records_non_production,
    from usage_windows
    group by k
),

grid as (
    select
        range as k,
    from range(
        0,
        least(
            $window_length_us // $usage_window_us,
            greatest(
                coalesce((select max(k) from usage_sums), -1),
                coalesce((select max(k) from step_sums), -1)
            ) + 1
        )
    )
),

requested as (
    select
        grid.k,
        -- level at the window start (steps of earlier windows) plus the partial steps inside it
        coalesce(sum(step_sums.d_cpu_production) over running_total, 0)
            - coalesce(step_sums.d_cpu_production, 0)
            + coalesce(step_sums.part_cpu_production, 0) as requested_cpu_production,
        coalesce(sum(step_sums.d_cpu_non_production) over running_total, 0)
            - coalesce(step_sums.d_cpu_non_production, 0)
            + coalesce(step_sums.part_cpu_non_production, 0) as requested_cpu_non_production,
        coalesce(sum(step_sums.d_memory_production) over running_total, 0)
            - coalesce(step_sums.d_memory_production, 0)
            + coalesce(step_sums.part_memory_production, 0) as requested_memory_production,
        coalesce(sum(step_sums.d_memory_non_production) over running_total, 0)
            - coalesce(step_sums.d_memory_non_production, 0)
            + coalesce(step_sums.part_memory_non_production, 0)
            as requested_memory_non_production,
    from grid
    left join step_sums on grid.k = step_sums.k
    window running_total as (order by grid.k rows between unbounded preceding and current row)
),

wide as (
    select
        requested.*,
        coalesce(usage_sums.used_cpu_production, 0) as used_cpu_production,
        coalesce(usage_sums.used_cpu_non_production, 0) as used_cpu_non_production,
        coalesce(usage_sums.used_memory_production, 0) as used_memory_production,
        coalesce(usage_sums.used_memory_non_production, 0) as used_memory_non_production,
        coalesce(usage_sums.records_production, 0) as records_production,
        coalesce(usage_sums.records_non_production, 0) as records_non_production,
    from requested
    left join usage_sums on requested.k = usage_sums.k
),

final as (
    select
        k as window_index,
        $window_start_us + k * $usage_window_us as window_start,
        'production' as priority_class,
        requested_cpu_production as requested_cpu,
        requested_memory_production as requested_memory,
        used_cpu_production as used_cpu,
        used_memory_production as used_memory,
        records_production as usage_records,
    from wide
    union all
    select
        k as window_index,
        $window_start_us + k * $usage_window_us as window_start,
        'non_production' as priority_class,
        requested_cpu_non_production as requested_cpu,
        requested_memory_non_production as requested_memory,
        used_cpu_non_production as used_cpu,
        used_memory_non_production as used_memory,
        records_non_production as usage_records,
    from wide
    order by window_index, priority_class desc
)

select * from final
