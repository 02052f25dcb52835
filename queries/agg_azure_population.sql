-- the population counts Cluster Admission App. B reports (deployments, arrivals in window, cores, cores that
-- became inactive), to reconcile a run against the paper and docs/methods.md §0.2
with

deployments as (
    select * from fct_azure_deployments
),

final as (
    select
        count(*) as deployments,
        count(*) filter (where arrived_in_window) as deployments_in_window,
        sum(n_vms)::bigint as vms,
        sum(n_vms) filter (where arrived_in_window)::bigint as vms_in_window,
        sum(n_cores) filter (where arrived_in_window)::bigint as cores_in_window,
        -- every core that became inactive, as the paper's totals count them (deaths + shutdowns)
        sum(cores_ended) filter (where arrived_in_window)::bigint as cores_inactive_in_window,
        count(*) filter (where arrived_in_window and not alive_at_end) as deployments_died_in_window,
        count(*) filter (where arrived_in_window and shut_down) as deployments_shut_down,
        sum(n_scaleouts) filter (where arrived_in_window)::bigint as scaleouts_in_window,
        -- cores that died of their own (the lifetime fit's events; shutdown ends are censored)
        sum(core_deaths) filter (where arrived_in_window)::bigint as core_deaths_in_window,
        -- every VM, survivors' included, as the V1 totals count them (104.4 M VM-hours, 237.8 M
        -- core-hours): lifetimes floored at one slot and cut at the window's end
        -- in deployment order: a sum of doubles depends on the order of its additions
        sum(vm_exposure_hours order by deploymentid) as vm_hours,
        sum(core_exposure_hours order by deploymentid) as core_hours,
    from deployments
)

select * from final
