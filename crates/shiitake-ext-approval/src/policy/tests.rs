//! The policy's rules, patterns and descriptions.

use super::*;
use proptest::prelude::*;

fn exec(line: &str) -> crate::command::Command {
    crate::command::Command::Line(line.to_owned())
}

#[test]
fn a_command_call_is_judged_by_its_commands_and_the_tool_decides_the_rest() {
    let policy = Policy::asks_before_edits()
        .with_command("cargo test*=allow".parse().unwrap())
        .unwrap()
        .with_command("rm -rf*=deny".parse().unwrap())
        .unwrap();
    let ruling = |line: &str| {
        policy
            .decide_call("commands__exec", false, Some(&exec(line)))
            .ruling
    };
    assert_eq!(ruling("ls -la && git status"), Ruling::Allow, "only reads");
    assert_eq!(ruling("cargo test --all"), Ruling::Allow);
    assert_eq!(ruling("make install"), Ruling::Ask, "the tool's own ruling");
    assert_eq!(ruling("cargo test; make install"), Ruling::Ask);
    assert_eq!(ruling("cargo test && rm -rf target"), Ruling::Deny);
    assert_eq!(ruling("cargo test > out.txt"), Ruling::Ask, "writes a file");
    assert_eq!(ruling("echo $(rm -rf /)"), Ruling::Ask);
    let why = policy
        .decide_call("commands__exec", false, Some(&exec("git status; rm -rf x")))
        .why("commands__exec");
    assert_eq!(why, "the host does not allow `rm -rf x` (rm -rf*=deny)");
    // Another tool's call is the tool rules' alone, whatever its arguments.
    assert_eq!(
        policy
            .decide_call("files__edit", false, Some(&exec("ls")))
            .ruling,
        Ruling::Ask
    );

    // A person who allows every tool still has the command rules' denials, and a
    // line that hides what it runs asks then.
    let allows = Policy::new(Ruling::Allow)
        .with_command("rm -rf*=deny".parse().unwrap())
        .unwrap();
    let ruling = |line: &str| {
        allows
            .decide_call("commands__exec", false, Some(&exec(line)))
            .ruling
    };
    assert_eq!(ruling("make install"), Ruling::Allow);
    assert_eq!(ruling("rm -rf /"), Ruling::Deny);
    assert_eq!(ruling("sh -c \"$X\""), Ruling::Ask);

    // A tool rule that denies the tool denies every command, the read-only ones too.
    let denies = Policy::parse(Ruling::Ask, ["commands__exec=deny"])
        .unwrap()
        .with_command("ls*=allow".parse().unwrap())
        .unwrap();
    assert_eq!(
        denies
            .decide_call("commands__exec", false, Some(&exec("ls")))
            .ruling,
        Ruling::Deny
    );
}

fn pattern(text: &str) -> Pattern {
    Pattern::new(text).unwrap_or_else(|error| panic!("{text}: {error}"))
}

#[test]
fn patterns_match_runs_of_any_characters() {
    let cases = [
        ("files__apply_patch", "files__apply_patch", true),
        ("files__apply_patch", "files__apply_patches", false),
        ("env__mcp__notes__*", "env__mcp__notes__create_note", true),
        ("env__mcp__notes__*", "env__mcp__notes__", true),
        ("env__mcp__notes__*", "env__mcp__other__create", false),
        (
            "env__computers__*",
            "env__computers__box__files__edit",
            true,
        ),
        ("*__files__edit", "env__computers__box__files__edit", true),
        ("*__files__edit", "files__edit", false),
        ("*", "anything", true),
        ("a*b*c", "abc", true),
        ("a*b*c", "aXbYbZc", true),
        ("a*b*c", "acb", false),
        ("**", "", true),
    ];
    for (p, tool, expected) in cases {
        assert_eq!(pattern(p).matches(tool), expected, "{p} ~ {tool}");
    }
}

#[test]
fn bad_patterns_and_rules_are_typed_errors() {
    assert_eq!(Pattern::new(""), Err(PolicyError::Empty));
    assert!(Pattern::new(&"a".repeat(MAX_PATTERN_BYTES)).is_ok());
    assert_eq!(
        Pattern::new(&"a".repeat(MAX_PATTERN_BYTES + 1)),
        Err(PolicyError::TooLong)
    );
    assert!(matches!(
        Pattern::new("files.read"),
        Err(PolicyError::Character { found: '.', .. })
    ));
    assert_eq!(
        "files__read".parse::<Rule>(),
        Err(PolicyError::Rule("files__read".into()))
    );
    assert_eq!(
        "files__read=maybe".parse::<Rule>(),
        Err(PolicyError::Ruling("maybe".into()))
    );
    assert_eq!(
        " files__* = deny ".parse::<Rule>(),
        Ok(Rule {
            pattern: pattern("files__*"),
            ruling: Ruling::Deny
        })
    );
    let full = (0..MAX_RULES).fold(Policy::new(Ruling::Ask), |policy, n| {
        policy
            .with(
                format!("t{n}=allow")
                    .parse()
                    .unwrap_or_else(|e| panic!("{e}")),
            )
            .unwrap_or_else(|e| panic!("{e}"))
    });
    assert_eq!(
        full.with("one__more=ask".parse().unwrap_or_else(|e| panic!("{e}"))),
        Err(PolicyError::TooManyRules)
    );
}

#[test]
fn the_most_specific_rule_decides_and_safe_tools_default_to_allow() {
    let policy = Policy::parse(
        Ruling::Ask,
        [
            "env__*=deny",
            "env__mcp__notes__*=allow",
            "env__mcp__notes__delete=ask",
            "env__mcp__*=ask",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ruling = |tool: &str, safe: bool| policy.decide(tool, safe).ruling;
    assert_eq!(ruling("env__mcp__notes__delete", false), Ruling::Ask);
    assert_eq!(ruling("env__mcp__notes__create", false), Ruling::Allow);
    assert_eq!(ruling("env__mcp__search__find", true), Ruling::Ask);
    assert_eq!(ruling("env__computers__box__run", false), Ruling::Deny);
    assert_eq!(ruling("files__read", true), Ruling::Allow);
    assert_eq!(ruling("files__edit", false), Ruling::Ask);
    let tie = Policy::parse(Ruling::Ask, ["a*=allow", "*a=deny"]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        tie.decide("aa", false).ruling,
        Ruling::Deny,
        "the later of equals"
    );
}

#[test]
fn the_default_asks_before_edits_only() {
    let policy = Policy::default();
    for edit in [
        "files__edit",
        "files__apply_patch",
        "env__computers__box__files__edit",
        "env__computers__box__files__apply_patch",
    ] {
        assert_eq!(policy.decide(edit, false).ruling, Ruling::Ask, "{edit}");
    }
    for other in ["files__read", "env__mcp__notes__create", "agents__send"] {
        assert_eq!(policy.decide(other, false).ruling, Ruling::Allow, "{other}");
    }
    assert_eq!(
        policy
            .decide("files__apply_patch", false)
            .why("files__apply_patch"),
        "the host asks before files__apply_patch"
    );
    assert_eq!(
        policy
            .decide("env__computers__box__files__edit", false)
            .why("env__computers__box__files__edit"),
        "the host asks before env__computers__box__files__edit (*__files__edit=ask)"
    );
}

/// A reference matcher: every split of the text, by recursion.
fn reference(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|i| reference(rest, &text[i..])),
        Some((c, rest)) => text.first() == Some(c) && reference(rest, &text[1..]),
    }
}

fn rule() -> impl Strategy<Value = Rule> {
    (
        "[ab_*]{1,6}",
        prop_oneof![Just(Ruling::Allow), Just(Ruling::Ask), Just(Ruling::Deny)],
    )
        .prop_map(|(p, ruling)| Rule {
            pattern: Pattern(p),
            ruling,
        })
}

proptest! {
    #[test]
    fn the_matcher_agrees_with_the_reference(p in "[ab_*]{1,8}", tool in "[ab_]{0,10}") {
        prop_assert_eq!(pattern(&p).matches(&tool), reference(p.as_bytes(), tool.as_bytes()));
    }

    #[test]
    fn an_exact_rule_decides_its_tool_whatever_else_is_there(
        rules in proptest::collection::vec(rule(), 0..8),
        tool in "[ab_]{1,6}",
        ruling in prop_oneof![Just(Ruling::Allow), Just(Ruling::Ask), Just(Ruling::Deny)],
        at in 0usize..8,
        safe: bool,
    ) {
        let mut rules = rules;
        let exact = Rule { pattern: Pattern(tool.clone()), ruling };
        rules.insert(at.min(rules.len()), exact);
        // Another exact rule for the same tool later would win the tie; keep this one last of its kind.
        rules.retain(|r| r.pattern.as_str() != tool || r.ruling == ruling);
        let policy = Policy { rules, default: Ruling::Ask, commands: Vec::new() };
        prop_assert_eq!(policy.decide(&tool, safe).ruling, ruling);
    }

    #[test]
    fn a_rule_that_does_not_match_changes_nothing(
        rules in proptest::collection::vec(rule(), 0..8),
        extra in rule(),
        tool in "[ab_]{0,6}",
        safe: bool,
    ) {
        prop_assume!(!extra.pattern.matches(&tool));
        let before = Policy { rules: rules.clone(), default: Ruling::Ask, commands: Vec::new() };
        let mut more = rules;
        more.push(extra);
        let after = Policy { rules: more, default: Ruling::Ask, commands: Vec::new() };
        prop_assert_eq!(before.decide(&tool, safe), after.decide(&tool, safe));
    }

    #[test]
    fn without_a_matching_rule_safe_tools_are_allowed_and_others_get_the_default(
        rules in proptest::collection::vec(rule(), 0..8),
        tool in "[ab_]{0,6}",
        default in prop_oneof![Just(Ruling::Allow), Just(Ruling::Ask), Just(Ruling::Deny)],
    ) {
        let policy = Policy { rules, default, commands: Vec::new() };
        prop_assume!(!policy.rules.iter().any(|r| r.pattern.matches(&tool)));
        prop_assert_eq!(policy.decide(&tool, true).ruling, Ruling::Allow);
        prop_assert_eq!(policy.decide(&tool, false).ruling, default);
    }

    #[test]
    fn a_rule_reads_back_what_it_writes(rule in rule()) {
        prop_assert_eq!(rule.to_string().parse::<Rule>(), Ok(rule));
    }
}
