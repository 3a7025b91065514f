//! Model selection from spec strings, with the errors a person sees.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use shiitake_model::{ModelEnv, ModelInfo, ModelProfile, SelectError, select};

fn env() -> ModelEnv {
    ModelEnv {
        openai_api_key: Some("sk".into()),
        anthropic_api_key: Some("ak".into()),
        ..ModelEnv::default()
    }
}

#[test]
fn each_provider_is_selected_with_its_identity() {
    let cases = [
        (
            "openai:gpt-4o",
            ModelInfo::new("openai-completions", "openai", "gpt-4o"),
        ),
        (
            "anthropic:claude-sonnet-4-5",
            ModelInfo::new("anthropic-messages", "anthropic", "claude-sonnet-4-5"),
        ),
        (
            "openai-compatible:http://127.0.0.1:11434/v1#llama3.2:3b",
            ModelInfo::new("openai-completions", "openai-compatible", "llama3.2:3b"),
        ),
    ];
    for (spec, info) in cases {
        assert_eq!(select(spec, &env()).unwrap().describe(), info, "{spec}");
    }
}

#[test]
fn a_missing_key_names_the_variable() {
    let error = select("openai:gpt-4o", &ModelEnv::default()).err().unwrap();
    assert!(matches!(
        error,
        SelectError::MissingKey {
            variable: "OPENAI_API_KEY",
            ..
        }
    ));
    assert_eq!(
        error.to_string(),
        "openai:gpt-4o needs OPENAI_API_KEY: set it in the environment (see docs/models.md)"
    );
    let error = select("anthropic:claude", &ModelEnv::default())
        .err()
        .unwrap();
    assert!(error.to_string().contains("ANTHROPIC_API_KEY"));
}

#[test]
fn malformed_and_unknown_specs_are_refused() {
    for spec in [
        "gpt-4o",
        "mistral:large",
        "openai:",
        "openai-compatible:http://x/v1",
        "openai-compatible:#m",
        "scripted:",
    ] {
        let error = select(spec, &env()).err().unwrap();
        assert!(
            matches!(
                error,
                SelectError::Unknown(_) | SelectError::Malformed { .. }
            ),
            "{spec}: {error}"
        );
    }
    let error = select("openai-compatible:localhost:8080#m", &env())
        .err()
        .unwrap();
    assert!(error.to_string().contains("http://"), "{error}");
    let error = select("scripted:/nonexistent/script.json", &env())
        .err()
        .unwrap();
    assert!(
        error.to_string().contains("/nonexistent/script.json"),
        "{error}"
    );
}

#[test]
fn base_urls_come_from_the_environment() {
    let mut env = env();
    env.openai_base_url = Some("http://proxy.local/v1".into());
    assert!(select("openai:gpt-4o", &env).is_ok());
    env.openai_base_url = Some("ftp://nope".into());
    assert!(matches!(
        select("openai:gpt-4o", &env),
        Err(SelectError::Config { .. })
    ));
}

#[test]
fn the_debug_form_hides_keys() {
    let text = format!("{:?}", env());
    assert!(!text.contains("\"sk\"") && text.contains("<set>"));
    assert!(!text.contains("\"ak\""));
}

#[test]
fn a_spec_marks_its_model_small_and_a_bad_option_is_refused() {
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), r#"{"turns": [{"steps": [{"text": "hi"}]}]}"#).unwrap();
    let scripted = format!("scripted:{}", script.path().display());
    let small = [
        "openai:gpt-4o-mini?profile=small".to_owned(),
        "anthropic:claude-haiku-4-5?profile=small".to_owned(),
        "openai-compatible:http://127.0.0.1:8090/v1#smollm2?profile=small".to_owned(),
        "openai-compatible:http://127.0.0.1:8090/v1#smollm2?tool_streaming=replay&profile=small"
            .to_owned(),
        format!("{scripted}?profile=small"),
    ];
    for spec in &small {
        let model = select(spec, &env()).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(model.profile(), ModelProfile::Small, "{spec}");
    }
    // The model id is what precedes the options.
    let model = select("openai:gpt-4o-mini?profile=small", &env()).unwrap();
    assert_eq!(model.describe().model, "gpt-4o-mini");
    for spec in [
        "openai:gpt-4o".to_owned(),
        "openai-compatible:http://127.0.0.1:8090/v1#smollm2?profile=full".to_owned(),
        scripted.clone(),
    ] {
        assert_eq!(
            select(&spec, &env()).unwrap().profile(),
            ModelProfile::Full,
            "{spec}"
        );
    }
    for (spec, complaint) in [
        ("openai:gpt-4o?profile=tiny", "`full` or `small`"),
        (
            "openai:gpt-4o?tool_streaming=replay",
            "unknown option `tool_streaming`",
        ),
        (
            "openai-compatible:http://x/v1#m?colour=red",
            "unknown option `colour`",
        ),
        ("openai-compatible:http://x/v1#m?profile", "needs a value"),
    ] {
        let error = select(spec, &env()).err().unwrap();
        assert!(
            matches!(error, SelectError::Malformed { .. }),
            "{spec}: {error}"
        );
        assert!(error.to_string().contains(complaint), "{spec}: {error}");
    }
}
