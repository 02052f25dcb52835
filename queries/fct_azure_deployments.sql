-- one row per deployment: arrival, scale-out counts and sizes, observed time, core exposure and
-- the shutdown flag; the sufficient statistics of every per-deployment MLE (Cluster Admission App. B.1).
-- integer sums are cast back to bigint: DuckDB widens sum(bigint) to int128 (a decimal in Parquet).
-- exposures are summed in integer seconds and divided once: a sum of doubles depends on the order
-- DuckDB's threads add them in, which made the last bits differ from run to run.
with

vms as (
    select
        deploymentid,
        vmcreated,
        vmdeleted,
        cores,
        greatest(vmdeleted - vmcreated, $grid_s) as lifetime_s,
        vmdeleted >= $censored_s as censored,
    from stg_vms
),

per_deployment_vms as (
    select
        deploymentid,
        min(vmcreated) as arrival_s,
        max(vmdeleted) as last_deleted_s,
        count(*) as n_vms,
        sum(cores)::bigint as n_cores,
        bool_or(censored) as alive_at_end,
    from vms
    group by deploymentid
),

scaleouts as (
    select
        deploymentid,
        count(*) filter (where not is_arrival) as n_scaleouts,
        coalesce(sum(cores) filter (where not is_arrival), 0)::bigint as scaleout_cores,
        sum(cores) filter (where is_arrival)::bigint as arrival_cores,
    from fct_azure_scaleouts
    group by deploymentid
),

last_endings as (
    -- how many VMs end exactly at the deployment's last deletion time
    select
        vms.deploymentid,
        count(*) as n_vms_ending_last,
    from vms
    inner join per_deployment_vms as d
        on vms.deploymentid = d.deploymentid and vms.vmdeleted = d.last_deleted_s
    group by vms.deploymentid
),

shutdowns as (
    select
        d.deploymentid,
        (not d.alive_at_end and l.n_vms_ending_last >= $shutdown_min_vms) as shut_down,
    from per_deployment_vms as d
    inner join last_endings as l on d.deploymentid = l.deploymentid
),

lifetimes as (
    -- a VM ended by the shutdown did not die of its own: like a VM alive at the end, it only
    -- tells that its lifetime exceeds what was seen, so it is censored too
    select
        vms.deploymentid,
        vms.cores,
        vms.lifetime_s,
        vms.censored or (s.shut_down and vms.vmdeleted = d.last_deleted_s) as censored,
        vms.censored as alive_at_end,
    from vms
    inner join per_deployment_vms as d on vms.deploymentid = d.deploymentid
    inner join shutdowns as s on vms.deploymentid = s.deploymentid
),

exposure as (
    select
        deploymentid,
        coalesce(sum(cores) filter (where not censored), 0)::bigint as core_deaths,
        coalesce(sum(cores) filter (where censored), 0)::bigint as censored_cores,
        -- every core that became inactive inside the window, by its own death or by the shutdown
        -- (Cluster Admission App. B's totals count both)
        coalesce(sum(cores) filter (where not alive_at_end), 0)::bigint as cores_ended,
        sum(cores * lifetime_s)::bigint / 3600.0 as core_exposure_hours,
        count(*) filter (where not censored) as vm_deaths,
        sum(lifetime_s)::bigint / 3600.0 as vm_exposure_hours,
    from lifetimes
    group by deploymentid
),

final as (
    select
        d.deploymentid,
        d.arrival_s,
        -- survivors (first VM at time 0) arrived before the window: only long-lived ones were
        -- seen, so they would bias every fit (Cluster Admission App. B)
        d.arrival_s > 0 as arrived_in_window,
        d.last_deleted_s,
        d.alive_at_end,
        d.n_vms,
        d.n_cores,
        s.arrival_cores,
        s.n_scaleouts,
        s.scaleout_cores,
        -- a scale-out adds 1 + Poisson(size) cores: the extra cores are the Poisson part
        s.scaleout_cores - s.n_scaleouts as scaleout_extra_cores,
        -- scale-outs can happen from arrival until the deployment dies or the trace ends
        greatest(least(d.last_deleted_s, $censored_s) - d.arrival_s, $grid_s) / 3600.0
            as observed_hours,
        -- per core (Cluster Admission): each core of a VM has the VM's lifetime
        e.core_deaths,
        e.censored_cores,
        e.core_exposure_hours,
        -- per VM: the independent lifetimes (cores of one VM die together)
        e.vm_deaths,
        e.vm_exposure_hours,
        greatest(d.last_deleted_s - d.arrival_s, $grid_s) / 3600.0 as lifetime_hours,
        l.n_vms_ending_last,
        -- shut down: at least $shutdown_min_vms VMs end together at the deployment's end
        sd.shut_down,
        e.cores_ended,
    from per_deployment_vms as d
    inner join scaleouts as s on d.deploymentid = s.deploymentid
    inner join last_endings as l on d.deploymentid = l.deploymentid
    inner join shutdowns as sd on d.deploymentid = sd.deploymentid
    inner join exposure as e on d.deploymentid = e.deploymentid
    -- a stable row order: repeated runs write identical files
    order by d.deploymentid
)

select * from final
