-- one row per published core-count bucket of a trace that publishes buckets (azure-2019): how
-- many VMs and VM-hours each holds and how many cores the marts count for it, so the share of
-- core counts that are only lower bounds (the open bucket) is on record beside the marts
with

vm_buckets as (
    select
        cores_bucket,
        cores_low,
        cores_high,
        cores_open,
        cores,
        greatest(vmdeleted - vmcreated, $grid_s) as lifetime_s,
    from stg_vm_buckets
),

final as (
    select
        cores_bucket,
        min(cores_low) as cores_low,
        min(cores_high) as cores_high,
        bool_or(cores_open) as cores_open,
        min(cores) as cores_counted,
        count(*) as vms,
        sum(lifetime_s)::bigint / 3600.0 as vm_hours,
        sum(cores * lifetime_s)::bigint / 3600.0 as counted_core_hours,
    from vm_buckets
    group by cores_bucket
    -- a stable row order: repeated runs write identical files
    order by min(cores_low) nulls last, cores_bucket
)

select * from final
