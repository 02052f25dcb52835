-- azure-2019's vmtable in the common VM shape the Azure marts read; cores is the number
-- stg_vm_buckets gives the VM's core bucket (a lower bound for the open bucket >24)
with

vm_buckets as (
    select * from stg_vm_buckets
),

final as (
    select
        vmid,
        deploymentid,
        vmcreated,
        vmdeleted,
        cores,
    from vm_buckets
)

select * from final
