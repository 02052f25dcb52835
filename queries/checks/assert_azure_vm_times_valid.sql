-- offending rows: VMs whose times are not on the 300 s grid, lie outside the 30-day window or end
-- before they start; the lifetime fits assume none
with

vms as (
    select deploymentid, vmid, vmcreated, vmdeleted from stg_vms
),

final as (
    select *
    from vms
    where vmcreated is null
        or vmdeleted is null
        or vmcreated < 0
        or vmdeleted > $censored_s
        or vmdeleted < vmcreated
        or vmcreated % $grid_s <> 0
        or vmdeleted % $grid_s <> 0
)

select * from final
