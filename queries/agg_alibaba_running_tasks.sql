-- alibaba-2018: batch tasks in execution per timestamp (the parallel of agg_running_tasks):
-- +1 at the start_time of every task that started (start_time > 0), -1 at the end_time of every
-- task that ended at or after its start; a task still Running at the end of the trace (end_time
-- 0 or before its start) is never subtracted. The trace records no submission time, so there is
-- no queue-length series (docs/derive.md).
with

tasks as (
    select
        start_time,
        end_time,
        status in ('Terminated', 'Failed', 'Cancelled', 'Interrupted')
            and end_time >= start_time as ended,
    from batch_task
    where start_time > 0
),

changes as (
    select start_time as time, 1 as starts, 0 as ends from tasks
    union all
    select end_time as time, 0 as starts, 1 as ends from tasks where ended
),

per_time as (
    select
        time,
        cast(sum(starts) as bigint) as starts,
        cast(sum(ends) as bigint) as ends,
    from changes
    group by time
),

final as (
    select
        time,
        starts,
        ends,
        starts - ends as running_change,
        cast(sum(starts - ends) over (
            order by time rows between unbounded preceding and current row
        ) as bigint) as running_tasks,
    from per_time
    order by time
)

select * from final
