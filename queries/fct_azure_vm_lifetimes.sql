-- one row per VM: its cores and its lifetime, right-censored when still alive at the end
-- (docs/methods.md §0.2: vmdeleted = $censored_s means "alive when the 30-day trace stopped")
with

vms as (
    select
        deploymentid,
        vmid,
        vmcreated,
        vmdeleted,
        cores,
    from stg_vms
),

final as (
    select
        deploymentid,
        vmid,
        vmcreated,
        vmdeleted,
        cores,
        -- the official notebook floors a lifetime at one 300 s slot: a VM seen at all lived
        greatest(vmdeleted - vmcreated, $grid_s) / 3600.0 as lifetime_hours,
        vmdeleted >= $censored_s as censored,
    from vms
    -- a stable row order: repeated runs write identical files
    order by deploymentid, vmid
)

select * from final
