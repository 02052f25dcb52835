-- alibaba-2018: the state transitions a batch_task or batch_instance row implies (docs/derive.md).
-- the trace keeps one row per task and per instance with its last status and its start and end
-- times, not an event log: a row with a start time (> 0) was Running from start_time, and a row
-- that ended (Terminated, Failed, Cancelled, Interrupted) went Running -> status at end_time, or
-- Waiting -> status when it never started.
-- states as the trace spells them; the graph (docs/derive.md) is
--   (none) -> Waiting | Running ;  Waiting -> Running | Cancelled ;  Running -> Terminated |
--   Failed | Cancelled | Interrupted
-- level: 'task' (batch_task) or 'instance' (batch_instance). time: s, NULL when the row gives
-- none (0). A status outside the graph (Ready, ...) stays the row's first state. times_consistent: the row's times agree with the transition (a
-- start after 0, an end at or after the start).
with

rows as (
    select
        'task' as level,
        job_name,
        task_name,
        cast(null as varchar) as instance_name,
        status,
        start_time,
        end_time,
        source_file,
        source_row,
    from batch_task
    union all
    select
        'instance' as level,
        job_name,
        task_name,
        instance_name,
        status,
        start_time,
        end_time,
        source_file,
        source_row,
    from batch_instance
),

ended as (
    select
        *,
        status in ('Terminated', 'Failed', 'Cancelled', 'Interrupted') as is_end,
        start_time > 0 as started,
    from rows
),

transitions as (
    -- the first state of every row: Running when it started, Waiting when it ended unstarted
    -- (cancelled while waiting), else its own status (Waiting, or one the graph does not know)
    select
        level, job_name, task_name, instance_name, source_file, source_row,
        case when started then start_time end as time,
        cast(null as varchar) as prev_state,
        case
            when started then 'Running'
            when is_end then 'Waiting'
            else status
        end as state,
        case
            when started or is_end then true
            else status is distinct from 'Running'
                and coalesce(start_time, 0) = 0 and coalesce(end_time, 0) = 0
        end as times_consistent,
    from ended
    union all
    select
        level, job_name, task_name, instance_name, source_file, source_row,
        case when end_time > 0 then end_time end as time,
        case when started then 'Running' else 'Waiting' end as prev_state,
        status as state,
        case when started then end_time >= start_time else true end as times_consistent,
    from ended
    where is_end
),

final as (
    select
        level,
        job_name,
        task_name,
        instance_name,
        time,
        prev_state,
        state,
        case
            when prev_state is null then null
            else prev_state || ' -> ' || state in (
                'Waiting -> Running',
                'Waiting -> Cancelled',
                'Running -> Terminated',
                'Running -> Failed',
                'Running -> Cancelled',
                'Running -> Interrupted'
            )
        end as allowed_by_documented_graph,
        times_consistent,
        source_file,
        source_row,
    from transitions
    order by level, source_file, source_row, prev_state nulls first
)

select * from final
