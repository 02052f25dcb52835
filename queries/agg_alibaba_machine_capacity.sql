-- alibaba-2018: machine capacity and churn over time from machine_meta (one row per event time).
-- a machine is present from its first event on; its state at time t is that of its last event at
-- or before t. machines / cpus / mem_total count present machines; using_* only those whose
-- state is USING. joins: machines whose first event is at t; status_changes: events whose status
-- differs from the machine's previous event. cpu_num is in cores, mem_size normalised per machine.
with

events as (
    select
        machine_id,
        time_stamp as time,
        status,
        cpu_num,
        mem_size,
        row_number() over (partition by machine_id order by time_stamp, source_file, source_row)
            as seq,
        lag(status) over (partition by machine_id order by time_stamp, source_file, source_row)
            as prev_status,
        lag(cpu_num) over (partition by machine_id order by time_stamp, source_file, source_row)
            as prev_cpu,
        lag(mem_size) over (partition by machine_id order by time_stamp, source_file, source_row)
            as prev_mem,
        lag(status = 'USING') over (
            partition by machine_id order by time_stamp, source_file, source_row
        ) as prev_using,
    from machine_meta
),

deltas as (
    -- each event changes the totals by (its values - the machine's previous values)
    select
        time,
        case when seq = 1 then 1 else 0 end as joins,
        case when seq > 1 and status is distinct from prev_status then 1 else 0 end
            as status_changes,
        coalesce(cpu_num, 0) - coalesce(prev_cpu, 0) as d_cpus,
        coalesce(mem_size, 0) - coalesce(prev_mem, 0) as d_mem,
        (case when status = 'USING' then 1 else 0 end)
        - (case when coalesce(prev_using, false) then 1 else 0 end) as d_using,
        (case when status = 'USING' then coalesce(cpu_num, 0) else 0 end)
        - (case when coalesce(prev_using, false) then coalesce(prev_cpu, 0) else 0 end)
            as d_using_cpus,
    from events
),

per_time as (
    select
        time,
        count(*) as events,
        sum(joins) as joins,
        sum(status_changes) as status_changes,
        sum(d_cpus) as d_cpus,
        sum(d_mem) as d_mem,
        sum(d_using) as d_using,
        sum(d_using_cpus) as d_using_cpus,
    from deltas
    group by time
),

final as (
    select
        time,
        events,
        cast(joins as bigint) as joins,
        cast(status_changes as bigint) as status_changes,
        cast(sum(joins) over w as bigint) as machines,
        cast(sum(d_using) over w as bigint) as using_machines,
        cast(sum(d_cpus) over w as bigint) as cpus,
        cast(sum(d_using_cpus) over w as bigint) as using_cpus,
        cast(sum(d_mem) over w as bigint) as mem_total,
    from per_time
    window w as (order by time rows between unbounded preceding and current row)
    order by time
)

select * from final
