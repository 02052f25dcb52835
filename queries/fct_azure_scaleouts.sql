-- one row per creation event of a deployment: VMs created at one timestamp are one event.
-- event_index 0 is the arrival (the first creation); every later event is a scale-out (Cluster Admission App. B).
with

vms as (
    select
        deploymentid,
        vmcreated,
        cores,
    from stg_vms
),

events as (
    select
        deploymentid,
        vmcreated as created_s,
        count(*) as n_vms,
        sum(cores)::bigint as cores,
    from vms
    group by deploymentid, vmcreated
),

final as (
    select
        deploymentid,
        created_s,
        n_vms,
        cores,
        row_number() over (partition by deploymentid order by created_s) - 1 as event_index,
        created_s = min(created_s) over (partition by deploymentid) as is_arrival,
    from events
    -- a stable row order: repeated runs write identical files
    order by deploymentid, created_s
)

select * from final
