"""Every place the project overrides or reaches into a library's internals, one module per override.

Why one package: such code is correct only for the library version it was written against. Here each
module says what it overrides and why, checks at import that the installed library still has it
(:mod:`.pins`: a clear error naming the version, or for CityLearn a logged fallback to the public,
slower path), and has its equivalence test under ``tests/fastpath/``. Nothing here imports the rest
of the package (only :mod:`iquitos_lightning.errors` and :mod:`iquitos_lightning.atomic_files`), so every
layer above can use it.

==========================  ==============================================  =================================
module                      library internal                                equivalence test
==========================  ==============================================  =================================
``citylearn_step``          CityLearn's ``_runtime_service._step_once``      ``test_citylearn_fast_path``
``citylearn_feedback``      CityLearn's ``BuildingOpsService._record_*``     ``test_citylearn_fast_path``
``collector_weights``       TorchRL ``MultiSyncCollector`` weight push       ``tests/agents/test_collection``
``collector_carrier``       TorchRL ``Collector._carrier``, ``_traj_pool``   ``test_collector_carrier``
``soft_update``             TorchRL ``SoftUpdate._sources/_targets``         ``test_soft_update``
``tanh_normal``             TorchRL ``TanhNormal`` sampling arithmetic       ``test_tanh_normal``
``replay_cursor``           TorchRL writer's ``_cursor``                     ``test_replay_cursor``
``dynamo_fallback``         ``torch._dynamo.config.suppress_errors``         ``tests/agents/test_speed``
``model_checkpoint``        six private ``ModelCheckpoint`` methods          ``test_model_checkpoint``
``cli_checkpoint``          ``LightningCLI._parse_ckpt_path``                ``tests/test_cli``
``lean_sac_loss``           TorchRL ``SACLoss`` internals (six names)         ``test_lean_sac_loss``
``lean_ppo_loss``           TorchRL ``ClipPPOLoss`` internals (six names)     ``test_lean_ppo_loss``
``lean_a2c_loss``           TorchRL ``A2CLoss._loss_mask_keys``               ``test_lean_a2c_loss``
``direct_actor_critic``     the on-policy losses' networks called directly   ``test_lean_ppo_loss``
``direct_modules``          ``nn.Module._apply`` (when to check again)       ``test_lean_*_loss``
``distribution_bounds``     ``nn.Module._apply`` (TanhNormal bounds moved)   ``tests/agents/test_speed``
``rollout_logging``         Lightning ``Trainer._logger_connector``          ``test_rollout_logging``
``foreach_ops``             ``torch._foreach_lerp_``, GradScaler's kernel    ``test_numerical_faults``
``unchecked_tensordict``    ``TensorDict._new_unsafe``                       ``tests/envs/test_twin``
``parser_options``          argparse's ``parser._actions``                   ``tests/test_cli``
``wandb_anonymous``         Lightning ``WandbLogger._wandb_init``            ``tests/test_first_hour``
``progress_description``    ``RichProgressBar._get_train_description``       ``test_progress_bar``
``highs_lp``                scipy's bundled HiGHS (``_highspy._core``)       ``test_highs_lp``
==========================  ==============================================  =================================
"""
