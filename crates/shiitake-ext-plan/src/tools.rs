//! The model tool `plan.update_plan` and the prompt section.

use shiitake_capabilities::Replay;
use shiitake_core::extension::kit::{KitError, Tool};

use crate::contract::{PlanStep, StepStatus, UpdatePlan};
use crate::state::PlanRecord;

/// `plan.update_plan`: replaces the checklist whole, in the owner's transaction. Its
/// input schema, derived from [`UpdatePlan`], carries the bounds, so `describe` shows them.
pub(crate) fn update_plan() -> Result<Tool<()>, KitError> {
    Ok(Tool::new(
        "update_plan",
        "Replace the Session's plan whole: at most 50 steps, at most one in_progress; \
         steps: [] clears it. A plan whose steps are all completed is finished.",
        |tx, update: UpdatePlan, _call| crate::extension::update_plan(tx, update.steps),
    )?
    // Replacing the whole plan twice with the same steps leaves the same plan.
    .replay(Replay::Safe))
}

/// One step as the prompt and the open checklist show it: `[x] Write tests`.
pub(crate) fn step_line(step: &PlanStep) -> String {
    let mark = match step.status {
        StepStatus::Pending => "[ ]",
        StepStatus::InProgress => "[>]",
        StepStatus::Completed => "[x]",
    };
    format!("{mark} {}", step.step)
}

/// Quiet context for the run: the live checklist.
pub(crate) fn prompt_section(plan: &PlanRecord) -> String {
    let mut section = format!(
        "Current plan (revision {}); update it with plan.update_plan as steps progress:\n",
        plan.revision
    );
    for step in &plan.steps {
        section.push_str(&step_line(step));
        section.push('\n');
    }
    section
}

#[cfg(test)]
mod tests {
    use crate::contract::{MAX_STEP_BYTES, MAX_STEPS};

    #[test]
    fn the_derived_schema_carries_the_bounds_and_refuses_unknown_fields() {
        let extension = crate::extension().expect("the plan extension builds");
        let (name, schema) = extension.tool_schemas().next().expect("one tool");
        assert_eq!(name, "update_plan");
        let steps = &schema["properties"]["steps"];
        assert_eq!(steps["maxItems"], MAX_STEPS);
        assert_eq!(
            steps["items"]["properties"]["step"]["maxLength"],
            MAX_STEP_BYTES
        );
        assert_eq!(steps["items"]["properties"]["step"]["minLength"], 1);
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(steps["items"]["additionalProperties"], false);
        assert_eq!(schema["required"], serde_json::json!(["steps"]));
    }
}
