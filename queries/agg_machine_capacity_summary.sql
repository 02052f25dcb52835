-- the numbers the machines page states, one row: machines_start, machines_end = machines up at
-- the window's start and end (agg_machine_capacity_pairs' sums); machines_max = the most up at any
-- time of agg_machine_capacity; adds, removes, updates = its events inside the window (time > 0);
-- days = the latest such time in days from the trace's time 0 (0 without one);
-- without_capacity_end, cpus_end, memory_end = its row at the latest time (machines up without a
-- known capacity; normalised totals); capacity_rows = its rows (the page needs one);
-- capacity_pairs = the capacities of agg_machine_capacity_pairs; other_pairs, other_machines_start,
-- other_machines_end, other_share_end = those the page does not list one by one, summed.
-- headline_key names the number the index shows beside the page's link and condition what it
-- holds under.
with

series as (
    select
        count(*) as capacity_rows,
        coalesce(max(machines), 0) as machines_max,
        coalesce(sum(adds) filter (where time > 0), 0) as adds,
        coalesce(sum(removes) filter (where time > 0), 0) as removes,
        coalesce(sum(updates) filter (where time > 0), 0) as updates,
        coalesce(max(time) filter (where time > 0), 0) / 86400000000 as days,
        coalesce(arg_max(machines_without_capacity, time), 0) as without_capacity_end,
        arg_max(cpus_total, time) as cpus_end,
        arg_max(memory_total, time) as memory_end,
    from agg_machine_capacity
),

pairs as (
    select
        coalesce(sum(machines_start), 0) as machines_start,
        coalesce(sum(machines_end), 0) as machines_end,
        count(*) as capacity_pairs,
        count(*) filter (where not shown) as other_pairs,
        coalesce(sum(machines_start) filter (where not shown), 0) as other_machines_start,
        coalesce(sum(machines_end) filter (where not shown), 0) as other_machines_end,
    from agg_machine_capacity_pairs
),

final as (
    select
        pairs.machines_start,
        pairs.machines_end,
        series.machines_max,
        series.adds,
        series.removes,
        series.updates,
        series.days,
        series.without_capacity_end,
        series.cpus_end,
        series.memory_end,
        series.capacity_rows,
        pairs.capacity_pairs,
        pairs.other_pairs,
        pairs.other_machines_start,
        pairs.other_machines_end,
        pairs.other_machines_end / nullif(pairs.machines_end, 0) as other_share_end,
        'machines_end' as headline_key,
        printf(
            'machines up after the last machine event before the window ends, %,d events over %.2f days',
            series.adds + series.removes + series.updates,
            series.days
        ) as condition,
    from series
    cross join pairs
)

select * from final
