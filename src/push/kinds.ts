/** The kinds of push token an installation registers (docs/api.md "API": `kind`), and iOS's environments. */
export const PUSH_TOKEN_KINDS = ['iosVoip', 'androidPush'] as const;
export type PushTokenKind = (typeof PUSH_TOKEN_KINDS)[number];

/** Which APNs origin an iOS token belongs to. */
export const IOS_ENVIRONMENTS = ['production', 'development'] as const;
export type IosEnvironment = (typeof IOS_ENVIRONMENTS)[number];
