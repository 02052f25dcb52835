-- google-2019: agg_g2019_machine_capacity_mix agrees at both snapshots with
-- agg_g2019_machine_capacity, which reaches the same state by running sums of per-event changes:
-- machines up and capacity totals (a machine of unknown capacity adds 0 to the series' totals;
-- 1e-6: float sums of normalized capacities)
with

series as (
    select
        'window_start' as snapshot,
        machines,
        cpus_total,
        memory_total,
    from agg_g2019_machine_capacity
    where time < $window_start_us
    qualify row_number() over (order by time desc) = 1
    union all
    select
        'window_end' as snapshot,
        machines,
        cpus_total,
        memory_total,
    from agg_g2019_machine_capacity
    qualify row_number() over (order by time desc) = 1
),

mix as (
    select
        snapshot,
        sum(machines) as machines,
        coalesce(sum(cpus_total), 0) as cpus_total,
        coalesce(sum(memory_total), 0) as memory_total,
    from agg_g2019_machine_capacity_mix
    group by snapshot
),

final as (
    select
        snapshot,
        mix.machines as mix_machines,
        series.machines as series_machines,
        mix.cpus_total as mix_cpus_total,
        series.cpus_total as series_cpus_total,
        mix.memory_total as mix_memory_total,
        series.memory_total as series_memory_total,
    from mix
    full join series using (snapshot)
    where coalesce(mix.machines, 0) <> coalesce(series.machines, 0)
        or abs(coalesce(mix.cpus_total, 0) - coalesce(series.cpus_total, 0)) > 1e-6
        or abs(coalesce(mix.memory_total, 0) - coalesce(series.memory_total, 0)) > 1e-6
)

select * from final
