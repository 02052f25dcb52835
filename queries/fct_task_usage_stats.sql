-- per-task distribution of inst and avg CPU usage (docs/methods.md §1.8, Janus & Rzadca §3.1).
-- inst = sampled_cpu_usage (one random second per window), avg = cpu_rate (the window mean).
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
    from task_events
    where event_type in (2, 3, 5, 6)
),

usage as (
    select
        job_id,
        task_index,
        sampled_cpu_usage as inst,
        case when cpu_rate > 1 then sampled_cpu_usage else cpu_rate end as avg,
    from task_usage
    anti join failing_tasks using (job_id, task_index)
    where sampled_cpu_usage is not null
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
    from usage
    window by_task as (
        partition by job_id, task_index
        order by inst, avg
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
        n_windows >= $long_task_windows as is_long,
    from per_task
    where inst_max > 0
    -- a stable row order: repeated and partitioned runs write identical files
    order by job_id, task_index
)

select * from final
