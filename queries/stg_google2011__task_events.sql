-- google-2011's task_events in the common task-event shape the task marts read: a task is
-- (job_id, task_index); event_type keeps the 2011 code and event names it in common words
-- (0 SUBMIT, 1 SCHEDULE, 2 EVICT, 3 FAIL, 4 FINISH, 5 KILL, 6 LOST, 7 UPDATE_PENDING,
-- 8 UPDATE_RUNNING; any other code 'other'). production = priority >= the derive option
-- production_priority (docs/methods.md §0.1), a DuckDB variable because a view takes no
-- parameters. missing_info: the format document's code of a record the trace synthesised (0 snapshot
-- but no transition, 1 no snapshot or transition, 2 exists but no creation); null = a genuine
-- record; missing_info_known: the code is one of those three, or null.
-- times keep the trace's markers: 0 before the window, 2^63-1 after it.
with

task_events_v2 as (
    select * from task_events
),

final as (
    select
        job_id,
        task_index,
        time,
        event_type,
        case event_type
            when 0 then 'submit'
            when 1 then 'schedule'
            when 2 then 'evict'
            when 3 then 'fail'
            when 4 then 'finish'
            when 5 then 'kill'
            when 6 then 'lost'
            when 7 then 'update_pending'
            when 8 then 'update_running'
            else 'other'
        end as event,
        priority,
        priority >= getvariable('production_priority') as is_production,
        missing_info,
        coalesce(missing_info in (0, 1, 2), true) as missing_info_known,
        cpu_request,
        memory_request,
        machine_id,
        source_file,
        source_row,
    from task_events_v2
)

select * from final
