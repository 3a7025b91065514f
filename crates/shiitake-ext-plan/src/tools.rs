//! The model tool `plan.update_plan` and the prompt section.

use serde_json::{Value, json};
use shiitake_capabilities::{Module, ModulePath, Operation, OperationName, Replay, ToolError};
use shiitake_core::extension::host::ToolTx;

use crate::contract::{MAX_STEP_BYTES, MAX_STEPS, NAMESPACE, StepStatus, UpdatePlan};
use crate::state::PlanRecord;

/// The input schema: the bounds are in it, so `describe` shows them.
pub(crate) fn update_plan_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "description": "The whole checklist, replacing the previous one; [] clears it.",
                "maxItems": MAX_STEPS,
                "items": {
                    "type": "object",
                    "properties": {
                        "step": {"type": "string", "minLength": 1, "maxLength": MAX_STEP_BYTES},
                        "status": {"enum": ["pending", "in_progress", "completed"]}
                    },
                    "required": ["step", "status"],
                    "additionalProperties": false
                }
            },
            "explanation": {"type": "string", "maxLength": 2000}
        },
        "required": ["steps"],
        "additionalProperties": false
    })
}

/// The `plan` module offered to every run.
pub(crate) fn module(tools: ToolTx) -> Option<Module> {
    let name = OperationName::new("update_plan").ok()?;
    let update = Operation::from_fn(
        name,
        "Replace the Session's plan whole: at most 50 steps, at most one in_progress; \
         steps: [] clears it. A plan whose steps are all completed is finished.",
        move |input, _ctx| {
            let tools = tools.clone();
            async move {
                let update: UpdatePlan = serde_json::from_value(input)
                    .map_err(|error| ToolError::for_model(format!("update_plan: {error}")))?;
                tools
                    .run(move |tx| crate::extension::update_plan(tx, update.steps))
                    .await
            }
        },
    )
    .with_input_schema(update_plan_schema())
    // Replacing the whole plan twice with the same steps leaves the same plan.
    .with_replay(Replay::Safe);
    Module::new(ModulePath::new(NAMESPACE).ok()?, "The Session's plan.")
        .with_operation(update)
        .ok()
}

/// Quiet context for the run: the live checklist.
pub(crate) fn prompt_section(plan: &PlanRecord) -> String {
    let mut section = format!(
        "Current plan (revision {}); update it with plan.update_plan as steps progress:\n",
        plan.revision
    );
    for step in &plan.steps {
        let mark = match step.status {
            StepStatus::Pending => "[ ]",
            StepStatus::InProgress => "[>]",
            StepStatus::Completed => "[x]",
        };
        section.push_str(&format!("{mark} {}\n", step.step));
    }
    section
}
