-- offending rows: VMs without a deployment or core count (every per-deployment fit needs both)
with

vms as (
    select vmid, deploymentid, cores from stg_vms
),

final as (
    select *
    from vms
    where deploymentid is null or deploymentid = '' or cores is null or cores < 1
)

select * from final
