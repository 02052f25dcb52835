-- offending rows: VMs without a deployment or core count (every per-deployment fit needs both)
with

vms as (
    select vmid, deploymentid, vmcorecount from vmtable
),

final as (
    select *
    from vms
    where deploymentid is null or deploymentid = '' or vmcorecount is null or vmcorecount < 1
)

select * from final
