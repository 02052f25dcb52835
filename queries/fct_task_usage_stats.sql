-- per-task distribution of inst and avg CPU usage (docs/methods.md §1.8, Janus & Rzadca §3.1), over
-- stg_task_usage and stg_task_events, so every trace whose staging gives both derives it.
-- inst = cpu_sampled (one random second per window; google-2011's sampled_cpu_usage), avg =
-- cpu_mean (the window mean; google-2011's cpu_rate). win_max_mean, win_p90_mean and mem_avg_mean
-- are the means over the windows of the window's maximum CPU, 90th CPU percentile and mean memory
-- (null where the trace does not record them: google-2011 has no percentiles); cpu_request is the
-- task's last requested CPU in stg_task_events.
-- kept: tasks with no EVICT FAIL KILL LOST event at any time (0 and 2^63-1 included), that have
-- inst > 0 in at least one window. where avg > 1 (above the largest machine: a measurement error)
-- it is replaced by the window's inst. usage rows without inst are not windows of the task;
-- a null avg is skipped by the avg statistics only.
-- std is the population std (stddev_pop, numpy's default ddof=0); percentiles interpolate
-- linearly between order statistics (quantile_cont, numpy's default "linear").
-- the statistics are window aggregates over each task's partition, not a group by: DuckDB keeps a
-- group-by quantile's values of every task in memory at once (1.2e9 rows in full), while the
-- window operator spills partitions to disk and holds one task's values at a time.
-- n_windows is T_i, the task's number of usage records; is_long = T_i >= $long_task_windows.
-- the window orders each task's rows by their values over the whole partition: float means and
-- stds depend on the order of their additions, which without an order is the order DuckDB's
-- threads deliver the rows in, so two runs could differ in the last bits; rows equal in every
-- value used are interchangeable, so this order fixes every result.
with

failing_tasks as (
    select distinct
        job_id,
        task_index,
    from stg_task_events
    where event in ('evict', 'fail', 'kill', 'lost')
),

requests as (
    select
        job_id,
        task_index,
        arg_max(cpu_request, (time, source_file, source_row)) as cpu_request,
    from stg_task_events
    where cpu_request is not null
    group by job_id, task_index
),

usage as (
    select
        job_id,
        task_index,
        cpu_sampled as inst,
        case when cpu_mean > 1 then cpu_sampled else cpu_mean end as avg,
        cpu_max as win_max,
        cpu_p90 as win_p90,
        memory_mean as mem_avg,
    from stg_task_usage
    anti join failing_tasks using (job_id, task_index)
    where cpu_sampled is not null
),

per_task as (
    select
        job_id,
        task_index,
        count(*) over by_task as n_windows,
        avg(inst) over by_task as inst_mean,
        stddev_pop(inst) over by_task as inst_std,
        min(inst) over by_task as inst_min,
        max(inst) over by_task as inst_max,
        quantile_cont(inst, [0.5, 0.9, 0.95, 0.99]) over by_task as inst_q,
        avg(avg) over by_task as avg_mean,
        stddev_pop(avg) over by_task as avg_std,
        min(avg) over by_task as avg_min,
        max(avg) over by_task as avg_max,
        quantile_cont(avg, [0.5, 0.9, 0.95, 0.99]) over by_task as avg_q,
        avg(win_max) over by_task as win_max_mean,
        avg(win_p90) over by_task as win_p90_mean,
        avg(mem_avg) over by_task as mem_avg_mean,
    from usage
    window by_task as (
        partition by job_id, task_index
        order by inst, avg, win_max, win_p90, mem_avg
        rows between unbounded preceding and unbounded following
    )
    qualify row_number() over by_task = 1
),

final as (
    select
        job_id,
        task_index,
        n_windows,
        inst_mean,
        inst_std,
        inst_min,
        inst_max,
        inst_q[1] as inst_p50,
        inst_q[2] as inst_p90,
        inst_q[3] as inst_p95,
        inst_q[4] as inst_p99,
        avg_mean,
        avg_std,
        avg_min,
        avg_max,
        avg_q[1] as avg_p50,
        avg_q[2] as avg_p90,
        avg_q[3] as avg_p95,
        avg_q[4] as avg_p99,
        win_max_mean,
        win_p90_mean,
        mem_avg_mean,
        requests.cpu_request,
        n_windows >= $long_task_windows as is_long,
    from per_task
    left join requests using (job_id, task_index)
    where inst_max > 0
    -- a stable row order: repeated and partitioned runs write identical files
    order by job_id, task_index
)

select * from final
