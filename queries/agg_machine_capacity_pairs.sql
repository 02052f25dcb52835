-- the capacity-mix table and figure of the machines page, one row per (cpus, memory) capacity of
-- agg_machine_capacity_mix (the (null, null) row: machines whose capacity the trace blanks):
-- machines_start, machines_end = machines up with it at the window's start and end (0 when none),
-- share_end = machines_end over all machines up at the end (NULL when none is), rank = 1 for the
-- capacity most machines have at the end (ties: smaller cpus, then memory; unknown last);
-- shown = among the 12 the page lists one by one (agg_machine_capacity_summary sums the rest).
with

pairs as (
    select
        cpus,
        memory,
        coalesce(sum(machines) filter (where snapshot = 'window_start'), 0) as machines_start,
        coalesce(sum(machines) filter (where snapshot = 'window_end'), 0) as machines_end,
    from agg_machine_capacity_mix
    group by cpus, memory
),

ranked as (
    select
        *,
        row_number() over (
            order by machines_end desc, cpus asc nulls last, memory asc nulls last
        ) as rank,
        sum(machines_end) over () as all_machines_end,
    from pairs
),

final as (
    select
        cpus,
        memory,
        machines_start,
        machines_end,
        machines_end / nullif(all_machines_end, 0) as share_end,
        rank,
        rank <= 12 as shown,
    from ranked
    order by rank
)

select * from final
