-- alibaba-2018: one row per batch task with instances (the parallel of fct_task_usage_stats, from
-- batch_instance's per-instance statistics). In cores (the trace's 1/100 core / 100):
-- avg_mean = mean of the instances' cpu_avg, avg_max = max of their cpu_avg, inst_max = max of
-- their cpu_max (the trace's only peak figure: its "inst"), plan_cpu = the task's request;
-- used_over_requested = avg_mean / plan_cpu (NULL without a request). mem_* stay normalised [0, 100].
-- instances with an invalid cpu (the publisher's -1 or 101 markers; any negative value) are left
-- out of the cpu statistics and counted in n_invalid_cpu.
-- means and stds come from exact sums (decimal(38, 18): each value rounded to 18 decimals, summed
-- in integer arithmetic; values within +-1e10): std = sqrt(mean(x^2) - mean(x)^2), 0 when all
-- values are equal. DuckDB's avg and stddev_pop of doubles add in the order its threads deliver
-- the rows, so two runs could differ in the last bits; an order (avg(x order by ...)) would cost a
-- sort per group.
with

instances as (
    select
        job_name,
        task_name,
        case when cpu_avg >= 0 then cpu_avg / 100 end as cpu_avg,
        case when cpu_max >= 0 then cpu_max / 100 end as cpu_max,
        case when mem_avg >= 0 and mem_avg <= 100 then mem_avg end as mem_avg,
        case when mem_max >= 0 and mem_max <= 100 then mem_max end as mem_max,
        cpu_avg < 0 or cpu_max < 0 as invalid_cpu,
    from batch_instance
),

per_task as (
    select
        job_name,
        task_name,
        count(*) as n_instances,
        count(*) filter (where invalid_cpu) as n_invalid_cpu,
        avg(cpu_avg::decimal(38, 18)) as avg_mean,
        case
            when count(cpu_avg) = 0 then null
            when min(cpu_avg) = max(cpu_avg) then 0.0
            else sqrt(greatest(
                avg((cpu_avg * cpu_avg)::decimal(38, 18)) - pow(avg(cpu_avg::decimal(38, 18)), 2), 0
            ))
        end as avg_std,
        max(cpu_avg) as avg_max,
        max(cpu_max) as inst_max,
        avg(mem_avg::decimal(38, 18)) as mem_avg_mean,
        max(mem_max) as mem_max,
    from instances
    group by job_name, task_name
),

final as (
    select
        per_task.*,
        batch_task.plan_cpu / 100 as plan_cpu,
        batch_task.plan_mem,
        case when batch_task.plan_cpu > 0 then per_task.avg_mean / (batch_task.plan_cpu / 100) end
            as used_over_requested,
    from per_task
    left join batch_task using (job_name, task_name)
    order by job_name, task_name
)

select * from final
