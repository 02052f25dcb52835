-- agg_g2019_machine_capacity: machine counts and capacity totals are never negative (1e-9:
-- float sums of normalized capacities)
with

final as (
    select
        time,
        machines,
        cpus_total,
        memory_total,
        machines_without_capacity,
    from agg_g2019_machine_capacity
    where machines < 0
        or machines_without_capacity < 0
        or machines_without_capacity > machines
        or cpus_total < -1e-9
        or memory_total < -1e-9
)

select * from final
