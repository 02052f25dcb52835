-- azure-2017's vmtable in the common VM shape the Azure marts read: V1 publishes each VM's
-- core count exactly, so cores is the published vmcorecount
with

vmtable_v1 as (
    select * from vmtable
),

final as (
    select
        vmid,
        subscriptionid,
        deploymentid,
        vmcreated,
        vmdeleted,
        vmcategory,
        vmcorecount as cores,
    from vmtable_v1
)

select * from final
