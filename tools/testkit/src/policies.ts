/**
 * A Cedar policy that gives each verdict (the policy tests of the gateway and the console use it):
 * read_file is allowed, except a target ending in .env (forbidden); deploy to production needs a
 * person (requires_human); anything else is denied. Line 3 is read-anything's condition.
 */
export const SAMPLE_POLICY = `@id("read-anything")
permit(principal, action, resource)
when { resource.name == "read_file" };

@id("deploy-reviewed")
@requires_human
permit(principal, action, resource)
when { resource.name == "deploy" && context.environment == "production" };

@id("no-secrets")
forbid(principal, action, resource)
when { resource.name == "read_file" && resource.target like "*.env" };`;
