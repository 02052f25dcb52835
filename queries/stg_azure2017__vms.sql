-- azure-2017's vmtable in the common VM shape the Azure marts read (only the columns they read,
-- so a --vmtable file with just those columns derives too): V1 publishes each VM's core count
-- exactly, so cores is the published vmcorecount
with

vmtable_v1 as (
    select * from vmtable
),

final as (
    select
        vmid,
        deploymentid,
        vmcreated,
        vmdeleted,
        vmcorecount as cores,
    from vmtable_v1
)

select * from final
