/** Plan limits, read from config/plans.json (never hard-coded here). */
import { CustosError } from '../errors.ts';
import { PLAN_IDS, type Plan, type PlanId, type Plans } from '../config/schema.ts';

export class PlanService {
  readonly #plans: Plans;
  constructor(plans: Plans) {
    this.#plans = plans;
  }

  get(id: string): Plan & { id: PlanId } {
    const planId = (PLAN_IDS as readonly string[]).includes(id) ? (id as PlanId) : 'free';
    return { id: planId, ...this.#plans[planId] };
  }

  isPlan(id: string): id is PlanId {
    return (PLAN_IDS as readonly string[]).includes(id);
  }

  assertWorkspaceCount(planId: string, current: number): void {
    const plan = this.get(planId);
    if (plan.workspacesPerAccount !== null && current >= plan.workspacesPerAccount) {
      throw new CustosError('CUSTOS_ERR_PLAN_LIMIT',
        `The ${plan.title} plan allows at most ${plan.workspacesPerAccount} workspaces per account; upgrade to create more.`,
        { details: { limit: 'workspacesPerAccount', max: plan.workspacesPerAccount, plan: plan.id } });
    }
  }

  assertCredentialCount(planId: string, current: number): void {
    const plan = this.get(planId);
    if (plan.credentialsPerWorkspace !== null && current >= plan.credentialsPerWorkspace) {
      throw new CustosError('CUSTOS_ERR_PLAN_LIMIT',
        `The ${plan.title} plan allows at most ${plan.credentialsPerWorkspace} credentials per workspace; upgrade to add more.`,
        { details: { limit: 'credentialsPerWorkspace', max: plan.credentialsPerWorkspace, plan: plan.id } });
    }
  }

  assertQueryDb(planId: string): void {
    const plan = this.get(planId);
    if (!plan.queryDb) {
      const enabling = PLAN_IDS.filter((id) => this.#plans[id].queryDb).map((id) => this.#plans[id].title);
      throw new CustosError('CUSTOS_ERR_PLAN_LIMIT',
        `query_db is not available on the ${plan.title} plan; it is enabled on ${enabling.join(' and ')}.`,
        { details: { limit: 'queryDb', plan: plan.id, enabledOn: enabling } });
    }
  }
}
